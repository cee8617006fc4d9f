/**
 * Bad input, table-driven: every case must answer with the spec's error JSON on stdout
 * (and nothing else there), exit non-zero, and leave the node and pod netns exactly as
 * they were (links, addresses, routes in all tables, rules, neighbours).
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import { startIpamStandin } from "../helpers/ipam_standin.ts";
import { sh } from "../helpers/sh.ts";
import { hostLocalIpam, hostLocalReserved, makeNode, runVpcni, type TestNode } from "./harness.ts";
import { STACK_TRACE } from "./refusal.ts";

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
  const deadSocket = `${node.dir}/nobody-listens.sock`;
  const standin = startNodeStandin(node, { addresses: ["10.77.0.50", "10.77.0.51"] });
  const emptySocket = `${node.dir}/empty.sock`;
  const empty = startIpamStandin({
    nodeNetns: node.node.path,
    socket: emptySocket,
    addresses: [],
    canGrow: false,
  });
  const strangerSocket = `${node.dir}/stranger.sock`;
  const stranger = Deno.serve({ path: strangerSocket, onListen() {} }, () => new Response("hello"));
  try {
    const base = vethDaemonConf("vcn-bad", standin.socket);
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
        // The interface exists before the datapath makes anything: code 4 naming CNI_IFNAME.
        code: 4,
        msg: /CNI_IFNAME "eth0" already exists/,
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
        // The interface exists before the datapath makes anything: code 4 naming CNI_IFNAME.
        code: 4,
        msg: /CNI_IFNAME "eth0" already exists/,
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
