/**
 * Keeping the node state true without spending the account's EC2 budget: the daemon compares
 * itself with IMDS every `imdsCheckSeconds` and calls EC2 only when the two disagree (or when
 * the long `ec2ResyncSeconds` period comes round).
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import {
  addReq,
  delReq,
  eventually,
  INSTANCE,
  standardScenario,
  startDaemonOn,
  startStack,
  SUBNETS,
  tempRoot,
} from "./harness.ts";

interface EniView {
  id: string;
  ips: string[];
}

const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("resync: a steady node reads only IMDS; changes made behind its back are found through IMDS", async () => {
  const stack = await startStack(
    standardScenario(),
    {
      pools: [{ name: "default", warmEnis: 0, warmIps: 3, minimumIps: 10, ipCooldownSeconds: 0 }],
      releaseDelaySeconds: 600, // the surplus made below stays put
      imdsCheckSeconds: 0.3,
      ec2ResyncSeconds: 3600,
      leakedEniGraceSeconds: 3600,
    },
    { imdsSettleMs: 300 },
  );
  try {
    const enis = () => stack.introspect<EniView[]>("/v1/enis");
    // m5.xlarge, minimumIps 10: the primary ENI holds the pool, with room for 4 more.
    const pooled = async () => (await enis())[0];
    assert.ok(await eventually(async () => (await pooled())?.ips.length === 10, 15_000));
    await sleep(1000); // the warm fill's last calls settle

    // Steady: pods come and go on warm addresses; IMDS is read, EC2 is not called at all.
    const ec2Before = sum(stack.sim.stats.ec2);
    const imdsBefore = stack.sim.stats.imds.get(INSTANCE) ?? 0;
    for (let i = 0; i < 3; i++) assert.ok((await stack.call(addReq(`r${i}`))).ok);
    for (let i = 0; i < 3; i++) assert.ok((await stack.call(delReq(`r${i}`))).ok);
    await sleep(2000);
    assert.equal(sum(stack.sim.stats.ec2) - ec2Before, 0, JSON.stringify([...stack.sim.stats.ec2]));
    assert.ok((stack.sim.stats.imds.get(INSTANCE) ?? 0) - imdsBefore > 10, "IMDS was read");

    // Behind the daemon's back (as a request sent by a killed daemon lands late): two more
    // addresses on its ENI, and one of its free addresses taken away. The next IMDS check
    // sees it; one EC2 re-sync adopts the new ones and drops the lost one.
    const eni = (await pooled())!;
    const added = stack.sim.state.assignPrivateIps(eni.id, { count: 2 }).ips;
    const lost = eni.ips[eni.ips.length - 1];
    stack.sim.state.unassignPrivateIps(eni.id, { ips: [lost] });
    assert.ok(
      await eventually(async () => {
        const now = (await pooled())!.ips;
        return added.every((ip) => now.includes(ip)) && !now.includes(lost);
      }, 5000),
      "the daemon adopted the new addresses and dropped the lost one",
    );
    assert.ok((stack.sim.stats.ec2.get("DescribeNetworkInterfaces") ?? 0) >= 1);

    // Agreement again: the calls stop.
    await sleep(1000);
    const settled = sum(stack.sim.stats.ec2);
    await sleep(1500);
    assert.equal(sum(stack.sim.stats.ec2), settled);
  } finally {
    await stack.close();
  }
});

Deno.test("resync: an ENI leaked before start is deleted once its grace is over, not a long EC2 period later", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const tags = {
    "vpcni.io/cluster": "test-cluster",
    "vpcni.io/instance-id": INSTANCE,
    "vpcni.io/created-at": new Date(Date.now() - 3_600_000).toISOString(),
  };
  const leaked = sim.state.createNetworkInterface({ subnetId: SUBNETS.internalA, tags }).id;
  const notOurs = sim.state.createNetworkInterface({
    subnetId: SUBNETS.internalA,
    tags: { ...tags, "vpcni.io/cluster": "other" },
  }).id;
  const root = await tempRoot();
  const started = Date.now();
  const daemon = await startDaemonOn(sim, root, {
    leakedEniGraceSeconds: 2,
    ec2ResyncSeconds: 3600,
  });
  try {
    assert.ok(await eventually(() => !sim.state.enis.has(leaked), 10_000));
    const tookMs = Date.now() - started;
    assert.ok(tookMs >= 2000, `deleted after its grace, not before (${tookMs} ms)`);
    assert.ok(sim.state.enis.has(notOurs), "another cluster's ENI is never touched");
  } finally {
    await daemon.stop();
    await sim.close();
    await Deno.remove(root, { recursive: true });
  }
});
