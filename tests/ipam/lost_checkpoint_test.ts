/**
 * A lost checkpoint (deleted, or moved aside after corruption as doctor advises) must not
 * turn running pods' addresses into free ones. The kernel still routes each running pod's
 * address (the datapath's `to <ip>/32 lookup main` rule at priority 1000, and the /32 route
 * over the pod's host veth): the daemon holds those addresses until the pod's DEL removes
 * them. A rule whose route is gone is a leftover of a pod that went without DEL.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { CHECKPOINT_FILE } from "../../ipam/checkpoint.ts";
import { hostKernelView } from "../../ipam/kernel_view.ts";
import type { RunningDaemon } from "../../ipam/daemon.ts";
import {
  addReq,
  eventually,
  ipamClient,
  standardScenario,
  startDaemonOn,
  tempRoot,
} from "./harness.ts";
import { run } from "../helpers/sh.ts";
import type { PoolView } from "../../proto/introspect.ts";

async function ip(...args: string[]) {
  const r = await run(["ip", ...args]);
  assert.equal(r.code, 0, `ip ${args.join(" ")}: ${r.stderr}`);
}

/** What the plugin's ADD leaves on the node for a pod: the rule, and the /32 route over its
 * host veth (a veth pair here, as the veth datapath makes). */
async function podHostObjects(node: string, podIp: string, hostVeth: string) {
  await ip("-n", node, "rule", "add", "to", `${podIp}/32`, "lookup", "main", "prio", "1000");
  await ip("-n", node, "link", "add", hostVeth, "type", "veth", "peer", "name", `${hostVeth}p`);
  await ip("-n", node, "link", "set", hostVeth, "up");
  await ip("-n", node, "route", "add", `${podIp}/32`, "dev", hostVeth, "scope", "link");
}

Deno.test("lost checkpoint: addresses the host still routes to pods stay held until their rules go", async () => {
  const node = `vlc${Deno.pid % 100000}`;
  await ip("netns", "add", node);
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const config = {
    pools: [{ name: "default", warmEnis: 0, warmIps: 4, minimumIps: 10, ipCooldownSeconds: 1 }],
  };
  const kernel = hostKernelView(`/run/netns/${node}`);
  let daemon: RunningDaemon | undefined;
  try {
    daemon = await startDaemonOn(sim, root, config, undefined, { kernel });
    let client = ipamClient(`${root}/ipam.sock`);
    const running: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await client.call(addReq(`run${i}`));
      assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
      running.push(r.allocation.ip);
      await podHostObjects(node, r.allocation.ip, `vh${i}`);
    }
    // The fourth pod's netns went without a DEL: its veth (and route) went with it, its rule
    // stayed. That address is a leftover, not a running pod's.
    await ip("-n", node, "link", "del", "vh3");
    const gone = running.pop()!;

    // The daemon stops; its checkpoint is lost; it starts again.
    await daemon.stop();
    await Deno.remove(`${root}/state/${CHECKPOINT_FILE}`);
    daemon = await startDaemonOn(sim, root, config, undefined, { kernel });
    client = ipamClient(`${root}/ipam.sock`);
    assert.equal(daemon.report.routedUnknown, 3, "the three running pods, not the gone one");
    const pools = () =>
      fetch(`http://127.0.0.1:${daemon!.introspectionAddr.port}/v1/pools`)
        .then((r) => r.json() as Promise<PoolView[]>);
    assert.equal((await pools())[0].used, 3, "the running pods' addresses count as used");
    // The new checkpoint carries them, for readers without the kernel (doctor, daemon down).
    const written = JSON.parse(await Deno.readTextFile(`${root}/state/${CHECKPOINT_FILE}`));
    assert.deepEqual(written.routedUnknown, [...running].sort());

    // New pods never get a running pod's address.
    const fresh: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await client.call(addReq(`new${i}`));
      assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
      fresh.push(r.allocation.ip);
    }
    for (const ipAddr of running) assert.ok(!fresh.includes(ipAddr), `${ipAddr} handed out twice`);
    void gone; // free like any address nobody holds (asserting when it is picked would be luck)

    // The first running pod is deleted (its DEL removes veth and rule; the daemon never knew
    // it): its address cools down and comes back to the pool.
    await ip("-n", node, "rule", "del", "to", `${running[0]}/32`, "lookup", "main", "prio", "1000");
    await ip("-n", node, "link", "del", "vh0");
    assert.ok(await eventually(async () => (await pools())[0].used === 2 + 12, 10_000));
    const next: string[] = [];
    assert.ok(
      await eventually(async () => {
        const r = await client.call(addReq(`again${next.length}`));
        if (r.ok && "allocation" in r) next.push(r.allocation.ip);
        return next.includes(running[0]);
      }, 15_000),
      `${running[0]} is free again once its pod is gone`,
    );
    assert.ok(!next.includes(running[1]) && !next.includes(running[2]));
  } finally {
    await daemon?.stop();
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
    await run(["ip", "netns", "del", node]);
  }
});
