/**
 * `doctor datapath --fix` on a host netns the test builds by hand: what it may remove
 * depends on knowing the allocations. With a checkpoint it removes vpcni-shaped leftovers
 * and keeps what a checkpointed pod still uses; with neither daemon nor checkpoint it
 * refuses, since every pod would look orphaned. With the daemon up after a lost checkpoint,
 * the pods it holds as routed-unknown keep their rules, veth and route.
 *
 * @module
 */
import assert from "node:assert/strict";
import { withNetns } from "../helpers/netns.ts";
import { freePort } from "../helpers/aws_peers.ts";
import { run, sh } from "../helpers/sh.ts";
import { vpcniArgv } from "../helpers/vpcni_cli.ts";
import { startSim } from "../../aws/sim/mod.ts";
import { CHECKPOINT_FILE } from "../../ipam/checkpoint.ts";
import { hostKernelView } from "../../ipam/kernel_view.ts";
import type { RunningDaemon } from "../../ipam/daemon.ts";
import { hostVethName } from "../../cni/datapath/naming.ts";
import { addReq, ipamClient, standardScenario, startDaemonOn, tempRoot } from "../ipam/harness.ts";

/** `doctor datapath` on `netns`; the daemon is `daemon` when given, else a closed port. */
async function doctorDatapath(
  netns: string,
  stateDir: string,
  extra: string[],
  daemon?: string,
) {
  const dead = `127.0.0.1:${freePort()}`;
  return await run(
    vpcniArgv(
      "doctor",
      "datapath",
      ...extra,
      "--host-netns",
      netns,
      "--daemon",
      daemon ?? dead,
      "--state-dir",
      stateDir,
      "--imds-endpoint",
      `http://${dead}`,
      "--timeout",
      daemon ? "3000" : "300",
      "--conflist-file",
      `${stateDir}/none.conflist`,
    ),
    { env: { ...Deno.env.toObject(), NO_COLOR: "1" } },
  );
}

/**
 * What ADD of the veth datapath leaves in the host netns for a pod on `ip` whose ENI uses
 * table `table`: both rules, the host veth (its peer in `pod`) and the /32 route over it.
 */
async function podObjects(host: string, pod: string, ip: string, veth: string, table: number) {
  await sh(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pod], {
    netns: host,
  });
  await sh(["ip", "link", "set", veth, "up"], { netns: host });
  await sh(["ip", "route", "add", `${ip}/32`, "dev", veth, "scope", "link"], { netns: host });
  await sh(["ip", "rule", "add", "priority", "1000", "to", `${ip}/32`, "lookup", "main"], {
    netns: host,
  });
  await sh(
    ["ip", "rule", "add", "priority", "2000", "from", `${ip}/32`, "lookup", String(table)],
    { netns: host },
  );
}

/** Fails unless each of the pod's host objects is still there. */
async function assertPodObjects(host: string, ip: string, veth: string) {
  const quoted = ip.replaceAll(".", "\\.");
  const rules = await sh(["ip", "rule"], { netns: host });
  assert.match(rules, new RegExp(`1000:\\s+from all to ${quoted} lookup main`), rules);
  assert.match(rules, new RegExp(`2000:\\s+from ${quoted} lookup`), rules);
  const routes = await sh(["ip", "route", "show", "table", "main"], { netns: host });
  assert.match(routes, new RegExp(`^${quoted} dev ${veth} `, "m"), routes);
  await sh(["ip", "link", "show", veth], { netns: host });
}

Deno.test("datapath --fix without daemon: uses the checkpoint, or refuses without one", async () => {
  await withNetns(["vdrh"], async (host) => {
    const state = await Deno.makeTempDir({ prefix: "vdr-fix-" });
    try {
      // A pod's rule (in the checkpoint) and a leftover of a pod that is gone.
      await sh(["ip", "rule", "add", "priority", "1000", "to", "10.70.1.5/32", "lookup", "main"], {
        netns: host.name,
      });
      await sh(["ip", "rule", "add", "priority", "1000", "to", "10.70.1.9/32", "lookup", "main"], {
        netns: host.name,
      });

      const refused = await doctorDatapath(host.path, state, ["--fix"]);
      assert.equal(refused.code, 2, refused.stdout);
      assert.match(
        refused.stderr.replace(/\s+/g, " "),
        /refusing --fix: with no daemon at \S+ and no checkpoint in \S+, every running pod/,
      );
      for (const l of refused.stderr.trimEnd().split("\n")) {
        assert.ok(l.length <= 80, `the refusal fits a terminal: ${l.length}: ${l}`);
      }
      let rules = await sh(["ip", "rule"], { netns: host.name });
      assert.match(rules, /10\.70\.1\.5/);
      assert.match(rules, /10\.70\.1\.9/);

      await Deno.writeTextFile(
        `${state}/ipam-checkpoint.json`,
        JSON.stringify({
          version: 1,
          instanceId: "i-0123456789abcdef0",
          savedAt: Date.now(),
          allocations: [{
            network: "vpcni",
            containerId: "c1",
            ifName: "eth0",
            ip: "10.70.1.5",
            eniId: "eni-0123456789abcdef0",
            pool: "default",
            time: Date.now(),
          }],
          cooldowns: [],
        }),
      );
      const fixed = await doctorDatapath(host.path, state, ["--fix"]);
      assert.match(fixed.stderr, /daemon is not answering[\s\S]*reading the\s+checkpoint/);
      assert.match(fixed.stdout, /done: delete rule 1000: to 10\.70\.1\.9\/32 lookup main/);
      rules = await sh(["ip", "rule"], { netns: host.name });
      assert.match(rules, /10\.70\.1\.5/, "the checkpointed pod's rule stays");
      assert.doesNotMatch(rules, /10\.70\.1\.9/);
    } finally {
      await Deno.remove(state, { recursive: true });
    }
  });
});

Deno.test("datapath --fix with no daemon and no checkpoint removes no pod's objects", async () => {
  await withNetns(["vdrh", "vdrp"], async (host, pod) => {
    const state = await Deno.makeTempDir({ prefix: "vdr-fix-" });
    try {
      await sh(["sysctl", "-qw", "net.ipv4.ip_forward=1"], { netns: host.name });
      // A running pod with every host object ADD makes, and a rule a pod left behind: with
      // no allocations known, the two cannot be told apart.
      const veth = hostVethName("vpc", "c-running", "eth0");
      await podObjects(host.name, pod.name, "10.70.2.5", veth, 101);
      await sh(["ip", "rule", "add", "priority", "1000", "to", "10.70.2.9/32", "lookup", "main"], {
        netns: host.name,
      });

      const dry = await doctorDatapath(host.path, state, []);
      assert.equal(dry.code, 0, dry.stdout + dry.stderr);
      assert.match(
        dry.stdout,
        /^\[warn\] datapath: cannot judge 2 pod address\(es\): no daemon, no checkpoint$/m,
      );
      assert.match(
        dry.stdout,
        /^ {7}fix: start the daemon \(it rebuilds its state\), then run doctor again$/m,
      );
      assert.doesNotMatch(dry.stdout, /would|orphan/);
      for (const l of dry.stdout.trimEnd().split("\n")) assert.ok(l.length <= 80, l);

      const refused = await doctorDatapath(host.path, state, ["--fix"]);
      assert.equal(refused.code, 2, refused.stdout);
      assert.equal(refused.stdout, "");
      assert.match(
        refused.stderr.replace(/\s+/g, " "),
        /refusing --fix: .* every running pod would look orphaned; start the daemon \(it rebuilds its state\), then run doctor again $/,
      );
      for (const l of refused.stderr.trimEnd().split("\n")) assert.ok(l.length <= 80, l);
      await assertPodObjects(host.name, "10.70.2.5", veth);
      assert.match(await sh(["ip", "rule"], { netns: host.name }), /10\.70\.2\.9/);
    } finally {
      await Deno.remove(state, { recursive: true });
    }
  });
});

Deno.test("datapath --fix with the daemon up keeps the pods it holds as routed-unknown", async () => {
  await withNetns(["vdrh", "vdrp", "vdrp"], async (host, web, db) => {
    const sim = await startSim({ scenario: standardScenario() });
    const root = await tempRoot();
    const config = {
      pools: [{ name: "default", warmEnis: 0, warmIps: 2, firstInterfaceIndex: 1 }],
    };
    const kernel = hostKernelView(host.path);
    let daemon: RunningDaemon | undefined;
    try {
      await sh(["sysctl", "-qw", "net.ipv4.ip_forward=1"], { netns: host.name });
      daemon = await startDaemonOn(sim, root, config, undefined, { kernel });
      const client = ipamClient(`${root}/ipam.sock`);
      const pods: { ip: string; veth: string }[] = [];
      for (const [name, ns] of [["web", web], ["db", db]] as const) {
        const r = await client.call(addReq(name));
        assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
        const veth = hostVethName("vpc", `c-${name}`, "eth0");
        // Their ENI is the pool's first, device 1: T(E) is table 101.
        await podObjects(host.name, ns.name, r.allocation.ip, veth, 101);
        pods.push({ ip: r.allocation.ip, veth });
      }
      // A rule left by a pod that is gone, for an address no ENI of the node has.
      await sh(
        ["ip", "rule", "add", "priority", "1000", "to", "10.0.250.9/32", "lookup", "main"],
        { netns: host.name },
      );

      // The checkpoint is lost; the daemon starts again and holds what the host routes.
      await daemon.stop();
      await Deno.remove(`${root}/state/${CHECKPOINT_FILE}`);
      daemon = await startDaemonOn(sim, root, config, undefined, { kernel });
      assert.equal(daemon.report.routedUnknown, 2);
      const addr = `127.0.0.1:${daemon.introspectionAddr.port}`;

      const fixed = await doctorDatapath(host.path, `${root}/state`, ["--fix"], addr);
      assert.equal(fixed.code, 0, fixed.stdout + fixed.stderr);
      assert.match(
        fixed.stdout.replace(/\s+/g, " "),
        /\[warn\] datapath: 1 orphan object\(s\), 2 address\(es\) held for pods no allocation names /,
      );
      assert.match(
        fixed.stdout.replace(/\s+/g, " "),
        /; leave held addresses be: each comes back when its pod is deleted /,
      );
      for (const p of pods) {
        assert.match(fixed.stdout, new RegExp(`${p.ip.replaceAll(".", "\\.")}: routed to a pod`));
      }
      assert.match(fixed.stdout, /^done: delete rule 1000: to 10\.0\.250\.9\/32 lookup main$/m);
      assert.equal(fixed.stdout.match(/^done:/gm)?.length, 1, fixed.stdout);
      for (const l of fixed.stdout.trimEnd().split("\n")) assert.ok(l.length <= 80, l);

      for (const p of pods) await assertPodObjects(host.name, p.ip, p.veth);
      assert.doesNotMatch(await sh(["ip", "rule"], { netns: host.name }), /10\.0\.250\.9/);
      const held = await fetch(`http://${addr}/v1/routed-unknown`).then((r) => r.json());
      assert.deepEqual(held, pods.map((p) => p.ip).sort(), "the daemon still holds both");
    } finally {
      await daemon?.stop();
      await sim.close();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    }
  });
});
