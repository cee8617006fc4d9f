/**
 * CNI_NETNS and logFile naming things that are not a pod's network namespace or a log
 * file, tried as an attacker or a broken runtime would: the node's own netns by every name
 * it has, FIFOs, sockets, devices, directories, other namespace types. Each is refused
 * with the spec's error and changes nothing: not the node's links, addresses, routes,
 * rules or neighbours, not the pod's, not the daemon's reservations. The node holds a live
 * pod throughout, so a DEL that wrongly went ahead would show.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { startNodeStandin, vethDaemonConf } from "../helpers/cni_standin_node.ts";
import { sh } from "../helpers/sh.ts";
import { makeNode, podEnv, runVpcni } from "./harness.ts";
import { assertRefused, runBounded, withInstalledPlugin } from "./refusal.ts";

interface Case {
  name: string;
  netns: string;
  verbs: ("ADD" | "CHECK" | "DEL")[];
  code: number;
  msg: RegExp;
}

Deno.test("hostile CNI_NETNS and logFile: refused, nothing changed, no hang", async (t) => {
  const testNode = await makeNode();
  const node = await withInstalledPlugin(testNode);
  const standin = startNodeStandin(node, {
    addresses: ["10.77.0.60", "10.77.0.61"],
  });
  const files = `${node.dir}/files`;
  await Deno.mkdir(files);
  const sleeper = new Deno.Command("ip", {
    args: ["netns", "exec", node.node.name, "sleep", "600"],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const listener = Deno.listen({ transport: "unix", path: `${files}/sock` });
  const alias = `${files}/node-alias`;
  try {
    const base = vethDaemonConf("vcn-hostile", standin.socket);
    // A live pod: its host veth, routes and rules are in the node, its reservation held.
    const live = await node.pod();
    const liveEnv = podEnv("ADD", "vcn-live-1", live.path, { CNI_PATH: node.bin.dir });
    const added = await runVpcni(node, liveEnv, JSON.stringify(base));
    assert.equal(added.code, 0, added.stdout + added.stderr);

    await sh(["mkfifo", `${files}/fifo`]);
    await Deno.writeTextFile(`${files}/regular`, "not a namespace\n");
    await Deno.writeTextFile(`${files}/empty`, "");
    await Deno.symlink(node.node.path, `${files}/node-link`);
    await Deno.symlink(`${files}/nowhere`, `${files}/dangling`);
    await Deno.writeTextFile(alias, "");
    await sh(["mount", "--bind", node.node.path, alias]);

    const all = ["ADD", "CHECK", "DEL"] as Case["verbs"];
    const own = /node's own network namespace|cannot be opened/;
    const cases: Case[] = [
      { name: "/proc/self/ns/net", netns: "/proc/self/ns/net", verbs: all, code: 4, msg: own },
      {
        name: "/proc/thread-self/ns/net",
        netns: "/proc/thread-self/ns/net",
        verbs: all,
        code: 4,
        msg: own,
      },
      // PID 1's netns is the real host's; where /proc/1 is hidden it cannot even be read.
      { name: "/proc/1/ns/net", netns: "/proc/1/ns/net", verbs: all, code: 4, msg: own },
      {
        name: "the node netns by its /run/netns name",
        netns: node.node.path,
        verbs: all,
        code: 4,
        msg: own,
      },
      {
        name: "a second bind mount of the node netns",
        netns: alias,
        verbs: all,
        code: 4,
        msg: own,
      },
      {
        name: "a symlink to the node netns",
        netns: `${files}/node-link`,
        verbs: all,
        code: 4,
        msg: own,
      },
      {
        name: "/proc/<pid>/ns/net of another process in the node",
        netns: `/proc/${sleeper.pid}/ns/net`,
        verbs: all,
        code: 4,
        msg: own,
      },
      { name: "a FIFO", netns: `${files}/fifo`, verbs: all, code: 4, msg: /is a FIFO/ },
      {
        name: "a regular file",
        netns: `${files}/regular`,
        verbs: all,
        code: 4,
        msg: /is a regular file/,
      },
      {
        name: "an empty regular file (ADD, CHECK)",
        netns: `${files}/empty`,
        verbs: ["ADD", "CHECK"],
        code: 4,
        msg: /is a regular file/,
      },
      { name: "/dev/null", netns: "/dev/null", verbs: all, code: 4, msg: /character device/ },
      { name: "/dev/zero", netns: "/dev/zero", verbs: all, code: 4, msg: /character device/ },
      { name: "a unix socket", netns: `${files}/sock`, verbs: all, code: 4, msg: /unix socket/ },
      { name: "a directory", netns: files, verbs: all, code: 4, msg: /is a directory/ },
      { name: "/run/netns itself", netns: "/run/netns", verbs: all, code: 4, msg: /directory/ },
      ...(["mnt", "uts", "user", "pid", "ipc", "cgroup"] as const).map((ns) => ({
        name: `a ${ns} namespace`,
        netns: `/proc/${sleeper.pid}/ns/${ns}`,
        verbs: all,
        code: 4,
        msg: /namespace, not a network namespace/,
      })),
      {
        name: "a dangling symlink (ADD, CHECK)",
        netns: `${files}/dangling`,
        verbs: ["ADD", "CHECK"],
        code: 3,
        msg: /does not exist/,
      },
      {
        name: "a path through a regular file (ADD, CHECK)",
        netns: `${files}/regular/x`,
        verbs: ["ADD", "CHECK"],
        code: 3,
        msg: /does not exist/,
      },
      {
        name: "a relative path",
        netns: "run/netns/x",
        verbs: all,
        code: 4,
        msg: /not an absolute path/,
      },
      {
        name: "a path longer than PATH_MAX",
        netns: `/${"n".repeat(5000)}`,
        verbs: all,
        code: 4,
        msg: /longer than 4095 bytes/,
      },
    ];

    const snapshot = async () => ({
      node: await kernelState(node.node.name),
      pod: await kernelState(live.name),
      reservations: [...standin.reservations.keys()].sort(),
    });
    const prevFor = (netns: string) => ({
      cniVersion: "1.1.0",
      interfaces: [{ name: "eth0", sandbox: netns }],
      ips: [{ address: "10.77.0.60/32", gateway: "169.254.1.1", interface: 0 }],
    });
    for (const c of cases) {
      for (const verb of c.verbs) {
        for (const role of ["main", "ipam"] as const) {
          // The IPAM role for a few classes only: its check is the same code path.
          if (role === "ipam" && !/FIFO|node netns by|mnt/.test(c.name)) continue;
          await t.step(`${verb} ${role}: ${c.name}`, async () => {
            for (const ifName of ["eth0", "eth0p"]) {
              const conf = role === "main"
                ? { ...base, ...(verb === "CHECK" ? { prevResult: prevFor(c.netns) } : {}) }
                : {
                  cniVersion: "1.1.0",
                  name: "vcn-hostile",
                  type: "ptp",
                  ipam: { type: "vpcni", daemonSocket: standin.socket },
                };
              const before = await snapshot();
              // The live pod's own container id: a DEL that went ahead would remove it.
              const r = await runBounded(
                node,
                podEnv(verb, "vcn-live-1", c.netns, { CNI_IFNAME: ifName, CNI_PATH: node.bin.dir }),
                JSON.stringify(conf),
              );
              assertRefused(r, c.code, c.msg);
              assert.deepEqual(await snapshot(), before, "nothing changed");
            }
          });
        }
      }
    }

    await t.step("DEL where a netns name lost its mount: the node side is cleaned up", async () => {
      const r = await runBounded(
        node,
        podEnv("DEL", "vcn-never-added", `${files}/empty`),
        JSON.stringify(base),
      );
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.equal(r.stdout, "");
    });

    await t.step(
      "a logFile that is a FIFO, directory, socket or device: code 7, no hang",
      async () => {
        for (const logFile of [`${files}/fifo`, files, `${files}/sock`, "/dev/null"]) {
          for (const role of ["main", "ipam"] as const) {
            const conf = role === "main"
              ? { ...base, logFile }
              : { cniVersion: "1.1.0", name: "n", type: "ptp", ipam: { type: "vpcni", logFile } };
            const before = await snapshot();
            const r = await runBounded(
              node,
              podEnv("ADD", "vcn-log-1", live.path, { CNI_IFNAME: "eth1" }),
              JSON.stringify(conf),
            );
            const field = role === "main" ? "logFile" : "ipam\\.logFile";
            assertRefused(r, 7, new RegExp(`${field} ${logFile.replaceAll("/", "\\/")} is a`));
            assert.deepEqual(await snapshot(), before, "nothing changed");
          }
        }
      },
    );
  } finally {
    listener.close();
    try {
      sleeper.kill("SIGKILL");
    } catch { /* gone */ }
    await sleeper.status;
    await sh(["umount", alias]).catch(() => {});
    await standin.close();
    await testNode.cleanup();
  }
});
