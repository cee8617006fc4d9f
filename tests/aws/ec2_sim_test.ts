/**
 * The aws/ec2 suite against the simulator (aws/sim). Each test gets a fresh simulator.
 * Faults are injected through the simulator's own fault layer: a scripted random source
 * decides which requests its throttle / 5xx dice fail.
 */
import assert from "node:assert/strict";
import { Ec2Client, type Ec2ClientOptions, Ec2Error } from "../../aws/ec2.ts";
import { type SimServer, startSim } from "../../aws/sim/mod.ts";
import { REGION, SUITE_SCENARIO, SUITE_WORLD } from "./sim_world.ts";
import { ec2Suite, type Ec2Target, type Quirk } from "./ec2_suite.ts";
import { ec2FilterSuite } from "./ec2_filter_suite.ts";
import { ec2ParitySuite } from "./ec2_parity_suite.ts";

/** Where the simulator is known to differ from EC2 (each asserted by the suite). */
const SIM_QUIRKS: Quirk[] = ["noVcpuInfo"];

/** A fresh simulator with the suite's world. */
async function simTarget(): Promise<Ec2Target> {
  // The fault dice: 0.99 passes both checks; queued values decide the next requests.
  const dice: number[] = [];
  const sim = await startSim({ scenario: SUITE_SCENARIO, random: () => dice.shift() ?? 0.99 });
  sim.faults.throttleProbability = 0.5;
  sim.faults.errorRate = 0.5;
  return {
    endpoint: sim.ec2Endpoint,
    region: REGION,
    world: SUITE_WORLD,
    quirks: new Set(SIM_QUIRKS),
    injectFault: ({ code, times }) => {
      for (let i = 0; i < times; i++) {
        // throttle check < 0.5 throttles; else error check < 0.5 fails, and < 0.5 picks 500.
        dice.push(...(code === "RequestLimitExceeded" ? [0] : [0.99, 0, 0]));
      }
    },
    setLatency: (action, ms) => {
      sim.faults.latencyMs[action] = ms;
    },
    close: () => sim.close(),
  };
}

ec2Suite("sim", simTarget);
ec2FilterSuite("sim", simTarget);
ec2ParitySuite("sim", simTarget);

// Faults only the simulator can cause: eventual consistency and server-side token buckets.

const CREDS = { accessKeyId: "test", secretAccessKey: "test" };
const simTest = (name: string, fn: (sim: SimServer) => Promise<void>) =>
  Deno.test({
    name: `ec2[sim]: ${name}`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const sim = await startSim({ scenario: SUITE_SCENARIO });
      try {
        await fn(sim);
      } finally {
        await sim.close();
      }
    },
  });
const clientFor = (sim: SimServer, o: Partial<Ec2ClientOptions> = {}) =>
  new Ec2Client({ region: REGION, endpoint: sim.ec2Endpoint, credentials: CREDS, ...o });

simTest("an ENI this client just created is waited for, not reported missing", async (sim) => {
  sim.faults.consistencyDelayMs = 1500;
  const c = clientFor(sim);
  const other = clientFor(sim);
  try {
    const eni = await c.createNetworkInterface({
      subnetId: SUITE_WORLD.subnetId,
      securityGroupIds: [],
    });
    // Another client did not create it: EC2's NotFound reaches it unchanged.
    await assert.rejects(
      other.describeNetworkInterfaces({ ids: [eni.eniId] }),
      (e: unknown) => e instanceof Ec2Error && e.code === "InvalidNetworkInterfaceID.NotFound",
    );
    const [seen] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
    assert.equal(seen.eniId, eni.eniId);
    assert.ok(
      (c.metrics.errors.get("DescribeNetworkInterfaces:InvalidNetworkInterfaceID.NotFound") ?? 0) >=
        1,
      "the first describe did hit the consistency delay",
    );
  } finally {
    c.close();
    other.close();
  }
});

simTest("client buckets sized like EC2's keep a burst from being throttled", async (sim) => {
  const bucket = { capacity: 5, refillPerSecond: 20 };
  sim.faults.throttle = true;
  sim.faults.actionBuckets = { DescribeSubnets: bucket };
  const burst = (c: Ec2Client) =>
    Promise.all([...Array(15)].map(() => c.describeSubnets({ ids: [SUITE_WORLD.subnetId] })));

  // Below EC2's numbers, as one would configure it: the two buckets do not tick in step.
  const paced = clientFor(sim, {
    buckets: { actions: { DescribeSubnets: { capacity: 4, refillPerSecond: 16 } } },
  });
  try {
    const answers = await burst(paced);
    assert.ok(answers.every((a) => a.length === 1));
    assert.equal(paced.metrics.throttles, 0, "paced client was never throttled");
    assert.ok(paced.metrics.throttleWaitMs > 0);
  } finally {
    paced.close();
  }
  await new Promise((r) => setTimeout(r, 400)); // let the simulator's bucket fill again

  const unpaced = clientFor(sim, { buckets: { enabled: false }, retry: { baseDelayMs: 100 } });
  try {
    const answers = await burst(unpaced);
    assert.ok(answers.every((a) => a.length === 1), "every call succeeded after retries");
    assert.ok(unpaced.metrics.throttles > 0, "unpaced burst was throttled by EC2");
    assert.equal(unpaced.metrics.retries, unpaced.metrics.throttles);
  } finally {
    unpaced.close();
  }
});
