/**
 * Bad input, table-driven: every case must answer with the spec's error JSON on stdout
 * (and nothing else there), exit non-zero, and leave the node and pod netns exactly as
 * they were (links, addresses, routes in all tables, rules, neighbours).
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startIpamStandin } from "../helpers/ipam_standin.ts";
import { sh } from "../helpers/sh.ts";
import { hostLocalIpam, hostLocalReserved, makeNode, runVpcni, type TestNode } from "./harness.ts";
import { assertRefused, runBounded, STACK_TRACE, withInstalledPlugin } from "./refusal.ts";

interface Case {
  name: string;
  command?: string;
  /** Environment overrides; a value of "" removes the variable. */
  env?: Record<string, string>;
  /** stdin: a string as is, or an object (or a function of the pod netns path giving one) merged over the base config. */
  stdin: string | Record<string, unknown> | ((podPath: string) => Record<string, unknown>);
  code: number;
  msg: RegExp;
  /** Expected cniVersion of the error (default: the request's). */
  errorVersion?: string;
  /** Extra setup inside the pod netns before the call. */
  setup?: (t: TestNode, podNs: string) => Promise<void>;
  /** Extra assertions after the call. */
  after?: (t: TestNode) => Promise<void>;
}

const okPrev = (netns: string, ip = "10.77.0.50") => ({
  cniVersion: "1.1.0",
  interfaces: [{ name: "vpc0", mac: "aa:bb:cc:00:00:01" }, {
    name: "eth0",
    mac: "aa:bb:cc:00:00:02",
    sandbox: netns,
  }],
  ips: [{ address: `${ip}/32`, gateway: "169.254.1.1", interface: 1 }],
  routes: [{ dst: "0.0.0.0/0", gw: "169.254.1.1" }],
});

Deno.test("bad input: spec error JSON, exit ≠ 0, kernel unchanged", async (t) => {
  const node = await makeNode();
  const socket = `${node.dir}/ipam.sock`;
  const deadSocket = `${node.dir}/nobody-listens.sock`;
  const standin = startIpamStandin({ socket, addresses: ["10.77.0.50", "10.77.0.51"] });
  const emptySocket = `${node.dir}/empty.sock`;
  const empty = startIpamStandin({ socket: emptySocket, addresses: [], canGrow: false });
  const strangerSocket = `${node.dir}/stranger.sock`;
  const stranger = Deno.serve({ path: strangerSocket, onListen() {} }, () => new Response("hello"));
  try {
    const base = {
      cniVersion: "1.1.0",
      name: "vcn-bad",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: socket,
    };
    const delegated = { ...base, ipam: hostLocalIpam(node.dir) };
    // Misbehaving IPAM plugins and a daemon that speaks something else: faults host-local and
    // the real daemon cannot be made to commit, so small stand-ins play them.
    const script = async (name: string, body: string, mode = 0o755) => {
      await Deno.writeTextFile(`${node.bin.dir}/${name}`, `#!/bin/sh\n${body}\n`, { mode });
    };
    await script("vcn-crashing-ipam", "echo 'panic: nil map' >&2; exit 2");
    await script(
      "vcn-v6-ipam",
      'if [ "$CNI_COMMAND" = ADD ]; then echo \'{"cniVersion":"1.1.0","ips":[{"address":"fd00::5/64"}]}\'; fi',
    );
    await script("vcn-not-executable", "exit 0", 0o644);
    const cases: Case[] = [
      { name: "malformed JSON", stdin: '{"cniVersion": "1.1.0", ', code: 6, msg: /not JSON/ },
      { name: "JSON that is not an object", stdin: "[]", code: 6, msg: /not a JSON object/ },
      {
        name: "unsupported cniVersion",
        stdin: { cniVersion: "0.2.0" },
        code: 1,
        msg: /incompatible CNI version "0\.2\.0"/,
        errorVersion: "1.1.0",
      },
      {
        name: "missing cniVersion",
        stdin: { cniVersion: undefined },
        code: 7,
        msg: /cniVersion is required/,
      },
      {
        name: "missing CNI_NETNS on ADD",
        env: { CNI_NETNS: "" },
        stdin: {},
        code: 4,
        msg: /CNI_NETNS/,
      },
      {
        name: "missing CNI_CONTAINERID",
        env: { CNI_CONTAINERID: "" },
        stdin: {},
        code: 4,
        msg: /CNI_CONTAINERID/,
      },
      {
        name: "bad ifname (colon)",
        env: { CNI_IFNAME: "eth0:1" },
        stdin: {},
        code: 4,
        msg: /CNI_IFNAME/,
      },
      {
        name: "bad ifname (16 bytes)",
        env: { CNI_IFNAME: "a234567890123456" },
        stdin: {},
        code: 4,
        msg: /CNI_IFNAME/,
      },
      { name: "unknown CNI_COMMAND", command: "ATTACH", stdin: {}, code: 4, msg: /CNI_COMMAND/ },
      {
        name: "unknown CNI_ARGS key",
        env: { CNI_ARGS: "K8S_POD_NAME=a;COLOR=blue" },
        stdin: {},
        code: 4,
        msg: /CNI_ARGS has unknown key "COLOR"/,
      },
      {
        name: "malformed CNI_ARGS",
        env: { CNI_ARGS: "K8S_POD_NAME" },
        stdin: {},
        code: 4,
        msg: /CNI_ARGS has a malformed pair/,
      },
      {
        name: "unknown datapath",
        stdin: { datapath: "macvlan" },
        code: 7,
        msg: /datapath must be one of/,
      },
      { name: "MTU out of range", stdin: { mtu: 100000 }, code: 7, msg: /mtu must be ≤ 9001/ },
      {
        name: "unsupported field",
        stdin: { bridge: "cni0" },
        code: 2,
        msg: /unsupported field bridge="cni0"/,
      },
      { name: "ipMasq", stdin: { ipMasq: true }, code: 2, msg: /ipMasq=true/ },
      {
        name: "unsupported capability",
        stdin: { capabilities: { portMappings: true } },
        code: 2,
        msg: /capabilities\.portMappings/,
      },
      {
        name: "netns that does not exist",
        env: { CNI_NETNS: "/run/netns/vcn-gone" },
        stdin: {},
        code: 3,
        msg: /vcn-gone does not exist/,
      },
      {
        name: "malformed prevResult",
        stdin: { prevResult: { cniVersion: "1.1.0", ips: [{ address: "10.0.0.1" }] } },
        code: 7,
        msg: /prevResult\.ips\[0\]\.address/,
      },
      {
        name: "CHECK without prevResult",
        command: "CHECK",
        stdin: {},
        code: 7,
        msg: /prevResult is required/,
      },
      {
        name: "CHECK with a prevResult for another interface",
        command: "CHECK",
        env: { CNI_IFNAME: "net1" },
        stdin: (p) => ({ prevResult: okPrev(p) }),
        code: 7,
        msg: /no interface net1/,
      },
      {
        name: "CHECK with a prevResult for another netns",
        command: "CHECK",
        stdin: { prevResult: okPrev("/run/netns/elsewhere") },
        code: 7,
        msg: /elsewhere, not CNI_NETNS/,
      },
      {
        name: "CHECK of an attachment the daemon does not know",
        command: "CHECK",
        stdin: (p) => ({ prevResult: okPrev(p) }),
        code: 3,
        msg: /no reservation/,
      },
      {
        name: "CHECK on a 0.3.1 config",
        command: "CHECK",
        stdin: (p) => ({ cniVersion: "0.3.1", prevResult: okPrev(p) }),
        code: 1,
        msg: /CHECK needs a newer cniVersion/,
      },
      {
        name: "GC on a 1.0.0 config",
        command: "GC",
        stdin: { cniVersion: "1.0.0" },
        code: 1,
        msg: /GC needs a newer/,
      },
      {
        name: "GC without CNI_PATH",
        command: "GC",
        env: { CNI_PATH: "" },
        stdin: {},
        code: 4,
        msg: /CNI_PATH is required for GC/,
      },
      {
        name: "daemon unreachable on ADD",
        stdin: { daemonSocket: deadSocket },
        code: 11,
        msg: new RegExp(`unreachable at ${deadSocket.replaceAll("/", "\\/")}`),
      },
      {
        name: "STATUS with the daemon unreachable",
        command: "STATUS",
        stdin: { daemonSocket: deadSocket },
        code: 50,
        msg: /plugin not available/,
      },
      {
        name: "STATUS with no IPs to be had",
        command: "STATUS",
        stdin: { daemonSocket: emptySocket },
        code: 51,
        msg: /no IPs available/,
      },
      {
        name: "delegated IPAM plugin missing",
        stdin: { ...delegated, ipam: { type: "no-such-ipam" } },
        code: 7,
        msg: /no-such-ipam/,
      },
      {
        name: "delegated IPAM plugin refuses its config",
        stdin: { ...delegated, ipam: { type: "host-local", ranges: [[{ subnet: "banana" }]] } },
        code: 999, // host-local's own code, passed on unchanged
        msg: /IPAM plugin host-local: invalid CIDR address: banana/,
      },
      {
        name: "IPAM plugin that cannot be run (I/O)",
        stdin: { ...delegated, ipam: { type: "vcn-not-executable" } },
        code: 5,
        msg: /could not run the IPAM plugin/,
      },
      {
        name: "IPAM plugin that crashes without a CNI error",
        stdin: { ...delegated, ipam: { type: "vcn-crashing-ipam" } },
        code: 103,
        msg: /vcn-crashing-ipam ADD exited 2 without a CNI error/,
      },
      {
        name: "IPAM plugin that returns no IPv4 address",
        stdin: { ...delegated, ipam: { type: "vcn-v6-ipam" } },
        code: 105,
        msg: /returned no IPv4 address/,
      },
      {
        name: "daemon socket answered by something else",
        stdin: { daemonSocket: strangerSocket },
        code: 102,
        msg: /not a JSON object/,
      },
      {
        name: "datapath fails after host-local reserved: reservation released",
        stdin: delegated,
        setup: async (_t, podNs) => {
          await sh(["ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0x"], {
            netns: podNs,
          });
        },
        code: 100,
        msg: /veth datapath: attach failed/,
        after: async (t) => assert.deepEqual(await hostLocalReserved(t.dir, "vcn-bad"), []),
      },
      {
        name: "datapath fails after the daemon reserved: reservation released",
        stdin: {},
        setup: async (_t, podNs) => {
          await sh(["ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0x"], {
            netns: podNs,
          });
        },
        code: 100,
        msg: /veth datapath: attach failed/,
        after: () => Promise.resolve(assert.equal(standin.reservations.size, 0)),
      },
    ];

    for (const c of cases) {
      await t.step(c.name, async () => {
        const podNs = (await node.pod()).name;
        if (c.setup) await c.setup(node, podNs);
        const env: Record<string, string> = {
          CNI_COMMAND: c.command ?? "ADD",
          CNI_CONTAINERID: "vcn-bad-1",
          CNI_NETNS: `/run/netns/${podNs}`,
          CNI_IFNAME: "eth0",
          CNI_PATH: node.bin.dir,
        };
        for (const [k, v] of Object.entries(c.env ?? {})) env[k] = v;
        // An empty value stands for "unset": the plugin treats both alike, as the spec does.
        const podPath = `/run/netns/${podNs}`;
        const over = typeof c.stdin === "function" ? c.stdin(podPath) : c.stdin;
        const stdin = typeof over === "string" ? over : JSON.stringify({ ...base, ...over });
        const before = [await kernelState(node.node.name), await kernelState(podNs)];
        const r = await runVpcni(node, env, stdin);
        const after = [await kernelState(node.node.name), await kernelState(podNs)];
        assert.notEqual(r.code, 0, `exit code for ${c.name}`);
        assert.ok(r.json, `stdout must be JSON, got ${JSON.stringify(r.stdout)}`);
        const e = r.json as { cniVersion: string; code: number; msg: string; details?: string };
        assert.deepEqual(Object.keys(e).filter((k) => k !== "details"), [
          "cniVersion",
          "code",
          "msg",
        ]);
        assert.equal(e.code, c.code, `code for ${c.name}: ${e.msg} ${e.details ?? ""}`);
        assert.match(e.msg, c.msg);
        const requested = typeof over === "object" && typeof over.cniVersion === "string"
          ? over.cniVersion
          : "1.1.0";
        assert.equal(e.cniVersion, c.errorVersion ?? requested);
        assert.deepEqual(after, before, "the kernel must be unchanged");
        assert.doesNotMatch(r.stdout + r.stderr, STACK_TRACE, "no stack trace");
        if (c.after) await c.after(node);
      });
    }
  } finally {
    await standin.close();
    await empty.close();
    await stranger.shutdown();
    await node.cleanup();
  }
});

interface RefusedCase {
  name: string;
  env?: Record<string, string>;
  /** Merged over the base config; a string replaces stdin. */
  stdin?: Record<string, unknown> | string;
  code: number;
  msg: RegExp;
  verbs?: string[];
}

const big = (n: number, c = "a") => c.repeat(n);

/**
 * Interface names the kernel treats specially and oversized input: refused before any
 * kernel or daemon call (the stand-in daemon must not even hear of the request).
 */
Deno.test("special interface names and oversized input: refused before the kernel or daemon", async (t) => {
  const testNode = await makeNode();
  const node = await withInstalledPlugin(testNode);
  const socket = `${node.dir}/ipam.sock`;
  const standin = startIpamStandin({ socket, addresses: ["10.77.0.52"] });
  try {
    const pod = await node.pod();
    const base = {
      cniVersion: "1.1.0",
      name: "vcn-big",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: socket,
    };
    const ifname = (name: string): RefusedCase => ({
      name: `CNI_IFNAME ${JSON.stringify(name)}`,
      env: { CNI_IFNAME: name },
      code: 4,
      msg: /^CNI_IFNAME /,
      verbs: ["ADD", "DEL", "CHECK"],
    });
    const annotations = (a: Record<string, string>) => ({
      runtimeConfig: { "io.kubernetes.cri.pod-annotations": a },
    });
    const cases: RefusedCase[] = [
      ...[
        "lo",
        "all",
        "default",
        "bonding_masters",
        ".",
        "..",
        "eth%d",
        "%s",
        "p%",
        "a/b",
        "eth0:1",
        "eth 0",
        "\t",
        "eth0\n",
        big(16, "e"),
        "ethé",
        "eth\u200b",
        "\u0001eth",
      ].map(ifname),
      { ...ifname(""), msg: /CNI_IFNAME is required/ },
      {
        name: "stdin over 1 MiB",
        stdin: { args: { pad: big(1024 * 1024) } },
        code: 7,
        msg: /stdin holds more than 1048576 bytes/,
        verbs: ["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"],
      },
      {
        name: "a prevResult with 100,000 ips (DEL)",
        stdin: {
          prevResult: {
            cniVersion: "1.1.0",
            ips: Array.from({ length: 100_000 }, (_, i) => ({
              address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}/32`,
            })),
          },
        },
        code: 7,
        msg: /more than 1048576 bytes/,
        verbs: ["DEL", "ADD"],
      },
      {
        name: "a prevResult with 65 ips",
        stdin: {
          prevResult: {
            cniVersion: "1.1.0",
            ips: Array.from({ length: 65 }, (_, i) => ({ address: `10.0.0.${i}/32` })),
          },
        },
        code: 7,
        msg: /prevResult\.ips has 65 entries; at most 64/,
        verbs: ["DEL", "ADD", "CHECK"],
      },
      {
        name: "a prevResult with 257 routes",
        stdin: {
          prevResult: {
            cniVersion: "1.1.0",
            ips: [],
            routes: Array(257).fill({ dst: "0.0.0.0/0" }),
          },
        },
        code: 7,
        msg: /prevResult\.routes has 257/,
      },
      {
        name: "513 annotations",
        stdin: annotations(
          Object.fromEntries(Array.from({ length: 513 }, (_, i) => [`k${i}`, "v"])),
        ),
        code: 7,
        msg: /has 513 entries; at most 512/,
      },
      {
        name: "a 5,000-character subnet selector",
        stdin: annotations({ "vpcni.io/subnet-selector": `zone=${big(4995)}` }),
        code: 7,
        msg: /vpcni\.io\/subnet-selector"\] is 5000 characters long; at most 4096/,
      },
      {
        name: "300 KiB of annotations",
        stdin: annotations({ "kubectl.kubernetes.io/last-applied-configuration": big(300 * 1024) }),
        code: 7,
        msg: /characters of keys and values; at most 262144/,
      },
      {
        name: "a 300-character network name",
        stdin: { name: big(300, "n") },
        code: 7,
        msg: /name is 300 characters long; at most 256/,
      },
      {
        name: "65 serviceCidrs",
        stdin: { serviceCidrs: Array(65).fill("10.96.0.0/12") },
        code: 7,
        msg: /serviceCidrs has 65/,
      },
      {
        name: "a daemonSocket longer than a socket address holds",
        stdin: { daemonSocket: `/${big(150)}` },
        code: 7,
        msg: /daemonSocket is 151 bytes long/,
      },
      {
        name: "a 257-character container id",
        env: { CNI_CONTAINERID: big(257, "c") },
        code: 4,
        msg: /CNI_CONTAINERID is 257 characters long/,
        verbs: ["ADD", "DEL", "CHECK"],
      },
      {
        name: "a container id outside the spec's characters",
        env: { CNI_CONTAINERID: "pod/../../etc" },
        code: 4,
        msg: /CNI_CONTAINERID/,
        verbs: ["ADD", "DEL", "CHECK"],
      },
      {
        name: "CNI_ARGS of 20 KiB",
        env: { CNI_ARGS: `K8S_POD_NAME=${big(20_000)}` },
        code: 4,
        msg: /CNI_ARGS is longer than 16384 bytes/,
      },
      {
        name: "CNI_ARGS with 65 pairs",
        env: { CNI_ARGS: Array(65).fill("IgnoreUnknown=1").join(";") },
        code: 4,
        msg: /more than 64 pairs/,
      },
      {
        name: "a 2,000-character pod name",
        env: { CNI_ARGS: `K8S_POD_NAME=${big(2000)}` },
        code: 4,
        msg: /K8S_POD_NAME longer than 1024/,
      },
      {
        name: "CNI_PATH with 65 entries",
        env: { CNI_PATH: Array(65).fill("/opt/cni/bin").join(":") },
        code: 4,
        msg: /CNI_PATH has 65 entries/,
        verbs: ["ADD", "GC"],
      },
      {
        name: "GC with 16,385 valid attachments",
        stdin: {
          "cni.dev/valid-attachments": Array(16385).fill({ containerID: "c", ifname: "eth0" }),
        },
        code: 7,
        msg: /valid-attachments has 16385/,
        verbs: ["GC"],
      },
    ];
    for (const c of cases) {
      for (const verb of c.verbs ?? ["ADD"]) {
        await t.step(`${verb}: ${c.name}`, async () => {
          const env: Record<string, string> = {
            CNI_COMMAND: verb,
            CNI_CONTAINERID: "vcn-big-1",
            CNI_NETNS: pod.path,
            CNI_IFNAME: "eth0",
            CNI_PATH: node.bin.dir,
            ...c.env,
          };
          for (const [k, v] of Object.entries(env)) if (v === "") delete env[k];
          const conf = { ...base, ...(typeof c.stdin === "object" ? c.stdin : {}) };
          const stdin = typeof c.stdin === "string" ? c.stdin : JSON.stringify(conf);
          const before = [await kernelState(node.node.name), await kernelState(pod.name)];
          const heard = standin.requests.length;
          const r = await runBounded(node, env, stdin);
          assertRefused(r, c.code, c.msg);
          assert.equal(standin.requests.length, heard, "the daemon heard nothing");
          const after = [await kernelState(node.node.name), await kernelState(pod.name)];
          assert.deepEqual(after, before, "the kernel is unchanged");
        });
      }
    }
  } finally {
    await standin.close();
    await testNode.cleanup();
  }
});
