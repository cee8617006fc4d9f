/**
 * Interface names the kernel treats specially, oversized input and top-level keys named after
 * Object.prototype's members, tried as a broken runtime or an attacker would: each is the
 * spec's error JSON with code 2, 4 or 7 naming the variable or field (and the bound), exit ≠ 0,
 * no stack trace, and refused before any kernel or daemon call — the node and pod are
 * unchanged and the stand-in daemon hears nothing.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import { makeNode, podEnv } from "./harness.ts";
import { assertRefused, runBounded, withInstalledPlugin } from "./refusal.ts";

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
Deno.test("special interface names, prototype keys and oversized input: refused before the kernel or daemon", async (t) => {
  const testNode = await makeNode();
  const node = await withInstalledPlugin(testNode);
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.52"],
  });
  try {
    const pod = await node.pod();
    const base = vethDaemonConf("vcn-big", standin.socket);
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
      // Own keys of the parsed JSON, like any unknown field: not Object.prototype's members.
      ...["__proto__", "constructor", "toString", "hasOwnProperty"].map((key) => ({
        name: `a top-level ${key}`,
        stdin: JSON.stringify(base).replace("{", `{"${key}":{"isAdmin":true},`),
        code: 2,
        msg: new RegExp(`^unsupported field ${key}=\\{"isAdmin":true\\}`),
        verbs: ["ADD", "DEL", "CHECK"],
      })),
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
          const env: Record<string, string> = podEnv(verb, "vcn-big-1", pod.path, {
            CNI_PATH: node.bin.dir,
            ...c.env,
          });
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
