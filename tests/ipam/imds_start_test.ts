/**
 * A start that reads IMDS and the checkpoint instead of EC2 (ipam/imds_start.ts), against the
 * simulator through the real SDK and IMDS clients: which starts make no Describe call, which
 * still ask EC2 (IMDS may lag, an ENI may not be ours), and that pods never get an address
 * the node does not own.
 */
import assert from "node:assert/strict";
import { type ScenarioInput, type SimServer, startSim } from "../../aws/sim/mod.ts";
import { createAwsCloud } from "../../ipam/aws_cloud.ts";
import { LIMITS_CACHE_FILE } from "../../ipam/imds_start.ts";
import { type NodeCore, startNodeCore } from "../../ipam/node_core.ts";
import {
  addReq,
  eventually,
  FAST_RETRY,
  INSTANCE,
  standardScenario,
  SUBNETS,
  tempRoot,
  testConfig,
} from "./harness.ts";

/** Periods long enough that nothing but the start and the pods' needs calls EC2. */
const QUIET = { ec2ResyncSeconds: 3600, leakedEniGraceSeconds: 3600, imdsCheckSeconds: 3600 };

interface World {
  sim: SimServer;
  root: string;
  start(o?: { imdsSettleMs?: number }): Promise<NodeCore>;
  describes(): Record<string, number>;
  close(): Promise<void>;
}

async function world(scenario: ScenarioInput, extra: Record<string, unknown> = {}): Promise<World> {
  const sim = await startSim({ scenario });
  const root = await tempRoot();
  const cores: NodeCore[] = [];
  return {
    sim,
    root,
    async start(o = {}) {
      const cloud = await createAwsCloud({
        ec2Endpoint: sim.ec2Endpoint,
        imdsEndpoint: sim.imdsEndpointFor(INSTANCE),
        ec2: FAST_RETRY as never,
      });
      const core = await startNodeCore(testConfig(root, { ...QUIET, ...extra }), cloud, {
        imdsSettleMs: o.imdsSettleMs,
      });
      cores.push(core);
      return core;
    },
    describes: () =>
      Object.fromEntries([...sim.stats.ec2].filter(([a]) => a.startsWith("Describe"))),
    async close() {
      for (const c of cores) await c.stop();
      await sim.close();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    },
  };
}

/** Every address the simulator has on the instance's ENIs (prefixes expanded). */
function ownedBy(sim: SimServer, instanceId = INSTANCE): Set<string> {
  const out = new Set<string>();
  for (const e of sim.state.enisOf(instanceId)) {
    for (const p of e.privateIps) out.add(p.address);
    for (const p of e.prefixes) {
      const [a, b, c, d] = p.cidr.split("/")[0].split(".").map(Number);
      for (let k = 0; k < 16; k++) out.add(`${a}.${b}.${c}.${d + k}`);
    }
  }
  return out;
}

async function addAll(core: NodeCore, names: string[]): Promise<string[]> {
  const ips: string[] = [];
  for (const n of names) {
    const r = await core.request(addReq(n));
    assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
    ips.push(r.allocation.ip);
  }
  return ips;
}

const settled = (core: NodeCore) => {
  return core.daemon.pools.view.warm("default").shortfall <= 0;
};

const names = (prefix: string, n: number) => [...Array(n)].map((_, i) => `${prefix}${i}`);

Deno.test("imds start: a cold node and its restart make no Describe call; the restart keeps its pods and ENIs", async () => {
  const w = await world(standardScenario(), {
    pools: [{ name: "default", warmEnis: 1, ipCooldownSeconds: 0 }],
  });
  try {
    let core = await w.start({ imdsSettleMs: 200 });
    const first = await addAll(core, names("a", 20));
    assert.ok(await eventually(() => settled(core), 15_000));
    assert.deepEqual(w.describes(), {}, "limits from the table, the node from IMDS");
    const enis = [...core.daemon.pools.growth.ctx.state.enis.keys()].sort();
    assert.ok(enis.length >= 2, "20 pods need a second ENI");
    await core.stop();
    await new Promise((r) => setTimeout(r, 300)); // past the IMDS settle time of this run
    w.sim.stats.ec2.clear();

    core = await w.start({ imdsSettleMs: 200 });
    assert.deepEqual(w.describes(), {}, "the restart reads IMDS and the checkpoint");
    assert.equal(core.daemon.report.kept, 20);
    assert.deepEqual([...core.daemon.pools.growth.ctx.state.enis.keys()].sort(), enis);
    const more = await addAll(core, names("b", 5));
    const owned = ownedBy(w.sim);
    for (const ip of more) {
      assert.ok(!first.includes(ip), `${ip} is not handed out twice`);
      assert.ok(owned.has(ip), `${ip} is assigned to the node in EC2`);
    }
  } finally {
    await w.close();
  }
});

Deno.test("imds start: a restart asks EC2 when IMDS could lag the last change, or does not show an ENI the checkpoint names", async () => {
  const w = await world(standardScenario(), {
    pools: [{ name: "default", warmEnis: 1, ipCooldownSeconds: 0 }],
  });
  try {
    let core = await w.start();
    await addAll(core, names("a", 20));
    assert.ok(await eventually(() => settled(core), 15_000));
    const enis = [...core.daemon.pools.growth.ctx.state.enis.keys()].sort();
    await core.stop();
    w.sim.stats.ec2.clear();
    // Within IMDS's settle time (10 s by default) of the last mutating call: EC2 is asked.
    core = await w.start();
    assert.equal(w.describes().DescribeNetworkInterfaces, 1);
    assert.equal(core.daemon.report.kept, 20);
    await core.stop();

    // IMDS stops showing the ENIs attached during the run (a lagging metadata service);
    // the checkpoint names them, so the start asks EC2 and still knows them.
    w.sim.state.faults.imdsDelayMs = 1e12;
    await new Promise((r) => setTimeout(r, 300));
    w.sim.stats.ec2.clear();
    core = await w.start({ imdsSettleMs: 200 });
    assert.equal(w.describes().DescribeNetworkInterfaces, 1);
    assert.equal(core.daemon.report.kept, 20);
    assert.deepEqual([...core.daemon.pools.growth.ctx.state.enis.keys()].sort(), enis);
  } finally {
    await w.close();
  }
});

Deno.test("imds start: an attached ENI the checkpoint does not name is described by id, and a foreign one is left alone", async () => {
  const scenario = standardScenario();
  scenario.networkInterfaces = [{
    subnet: SUBNETS.node,
    secondaryIps: 5,
    tags: { "other.io/owner": "someone-else" },
    attachment: { instance: INSTANCE, deviceIndex: 1 },
  }];
  const w = await world(scenario, { pools: [{ name: "default", warmIps: 20, warmEnis: 0 }] });
  try {
    const core = await w.start({ imdsSettleMs: 200 });
    assert.deepEqual(w.describes(), { DescribeNetworkInterfaces: 1 });
    assert.deepEqual(core.daemon.report.foreignDeviceIndexes, [1]);
    const foreign = w.sim.state.enisOf(INSTANCE).find((e) => e.attachment!.deviceIndex === 1)!;
    const theirs = new Set(foreign.privateIps.map((p) => p.address));
    for (const ip of await addAll(core, names("p", 20))) {
      assert.ok(!theirs.has(ip), `${ip} belongs to another owner's ENI`);
    }
  } finally {
    await w.close();
  }
});

Deno.test("imds start: a type the embedded table lacks is asked once, and a restart reads the state dir", async () => {
  const w = await world(standardScenario({ type: "zz1.large", maxEnis: 3, ipv4PerEni: 6 }));
  try {
    let core = await w.start({ imdsSettleMs: 200 });
    assert.equal(w.describes().DescribeInstanceTypes, 1);
    await core.stop();
    const cached = JSON.parse(await Deno.readTextFile(`${w.root}/state/${LIMITS_CACHE_FILE}`));
    assert.deepEqual(cached, { "zz1.large": { maxEnis: 3, ipv4PerEni: 6 } });
    w.sim.stats.ec2.clear();
    core = await w.start({ imdsSettleMs: 200 });
    assert.equal(w.describes().DescribeInstanceTypes, undefined);
    assert.equal(core.daemon.pools.growth.ctx.maxEnis, 3);
  } finally {
    await w.close();
  }
});

Deno.test("imds start: addresses the launch gave the primary ENI are the pool's, with no EC2 call", async (t) => {
  for (
    const c of [
      { launch: { secondaryIps: 14, prefixes: 0 }, pool: { warmEnis: 1 }, pods: 14 },
      {
        launch: { secondaryIps: 0, prefixes: 3 },
        pool: { prefixDelegation: true, warmEnis: 0, warmIps: 16, minimumIps: 48 },
        pods: 30,
      },
    ]
  ) {
    await t.step(JSON.stringify(c.launch), async () => {
      const scenario = standardScenario();
      Object.assign(scenario.instances![0], c.launch);
      const w = await world(scenario, { pools: [{ name: "default", ...c.pool }] });
      try {
        const core = await w.start({ imdsSettleMs: 200 });
        const launched = ownedBy(w.sim);
        assert.ok(await eventually(() => settled(core), 5_000));
        assert.deepEqual(Object.fromEntries(w.sim.stats.ec2), {}, "a warm pool with no EC2 call");
        const ips = await addAll(core, names("p", c.pods));
        for (const ip of ips) assert.ok(launched.has(ip), `${ip} was assigned at launch`);
        // 30 pods of 48 prefix addresses leave 18 free, above warmIps: still no call.
        if (c.launch.prefixes) assert.deepEqual(Object.fromEntries(w.sim.stats.ec2), {});
      } finally {
        await w.close();
      }
    });
  }
});
