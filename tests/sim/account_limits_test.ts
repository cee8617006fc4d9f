/**
 * The simulator's account-level request limits, seen through the project's real EC2 client
 * (the AWS SDK over HTTP): several nodes, each within its own client-side budget, share one
 * account's buckets and are throttled together, as EC2 throttles per account and Region.
 */
import assert from "node:assert/strict";
import { Ec2Client } from "../../aws/ec2.ts";
import { AWS_ACCOUNT_BUCKETS, startSim } from "../../aws/sim/mod.ts";
import { IDS, smallScenario } from "./sim_helpers.ts";

const credentials = { accessKeyId: "test", secretAccessKey: "test" };

/** A node's client: its own buckets at EC2's numbers, one attempt per call (no retries). */
function nodeClient(endpoint: string): Ec2Client {
  return new Ec2Client({ region: "us-east-1", endpoint, credentials, maxAttempts: 1 });
}

async function tagBurst(c: Ec2Client, n: number): Promise<string[]> {
  const codes: string[] = [];
  await Promise.all(
    [...Array(n)].map((_, i) =>
      c.createTags([IDS.vpc], { [`k${i}`]: "v" }).then(
        () => void codes.push("ok"),
        (e) => void codes.push(`${e.code}/${e.httpStatus}`),
      )
    ),
  );
  return codes;
}

Deno.test("two nodes within their own budgets exhaust the account's CreateTags bucket together", async () => {
  // The buckets' clock stands still: nothing refills, so the count is exact.
  const sim = await startSim({
    scenario: { ...smallScenario(), faults: { accountLimits: true } },
    clock: () => 0,
  });
  const a = nodeClient(sim.ec2Endpoint);
  const b = nodeClient(sim.ec2Endpoint);
  try {
    const capacity = AWS_ACCOUNT_BUCKETS.actions.CreateTags.capacity;
    assert.equal(capacity, 100);
    const [ca, cb] = await Promise.all([tagBurst(a, 60), tagBurst(b, 60)]);
    assert.equal(a.metrics.throttleWaitMs + b.metrics.throttleWaitMs, 0, "no node paced itself");
    const all = [...ca, ...cb];
    assert.equal(all.filter((c) => c === "ok").length, capacity);
    assert.equal(all.filter((c) => c === "RequestLimitExceeded/503").length, 120 - capacity);
    assert.equal(a.metrics.throttles + b.metrics.throttles, 20);
    assert.equal(sim.stats.errors.get("CreateTags:RequestLimitExceeded"), 20);
    // Another action has its own account bucket.
    assert.equal((await a.describeSubnets({ ids: [IDS.publicSubnet] })).length, 1);
  } finally {
    a.close();
    b.close();
    await sim.close();
  }
});

Deno.test("account limits follow AWS's numbers per action and are off unless asked for", async () => {
  const sim = await startSim({ scenario: smallScenario(), clock: () => 0 });
  const a = nodeClient(sim.ec2Endpoint);
  try {
    assert.deepEqual(await tagBurst(a, 120).then((c) => c.filter((x) => x !== "ok")), []);
    sim.faults.accountLimits = true;
    // Mutating actions without a number of their own get the category's 50.
    const codes: string[] = [];
    for (let i = 0; i < 55; i++) {
      await a.detachNetworkInterface({ attachmentId: "eni-attach-00000000000000000" }).catch((e) =>
        codes.push(e.code)
      );
    }
    assert.equal(codes.filter((c) => c === "RequestLimitExceeded").length, 5);
    assert.equal(codes.length, 55, "the 50 that passed failed for the made-up attachment");
  } finally {
    a.close();
    await sim.close();
  }
});
