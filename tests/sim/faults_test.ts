/**
 * Fault injection of the simulator, seen through the real SDK: throttling per action with
 * token buckets, random throttles and 5xx, latency, eventual consistency, and the request log.
 */
import assert from "node:assert/strict";
import {
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
} from "@aws-sdk/client-ec2";
import { startSim } from "../../aws/sim/mod.ts";
import { IDS, rejection, sdkClient, smallScenario } from "./sim_helpers.ts";

Deno.test("a per-action token bucket throttles that action with RequestLimitExceeded (503) only", async () => {
  const sim = await startSim({ scenario: smallScenario() });
  const ec2 = sdkClient(sim);
  try {
    sim.faults.throttle = true;
    sim.faults.actionBuckets.DescribeSubnets = { capacity: 2, refillPerSecond: 0 };
    await ec2.send(new DescribeSubnetsCommand({}));
    await ec2.send(new DescribeSubnetsCommand({}));
    const err = await rejection(() => ec2.send(new DescribeSubnetsCommand({})));
    assert.equal(err.name, "RequestLimitExceeded");
    assert.equal(err.$metadata?.httpStatusCode, 503);
    await ec2.send(new DescribeVpcsCommand({})); // another action has its own bucket
    sim.faults.throttle = false;
    await ec2.send(new DescribeSubnetsCommand({}));
    assert.equal(sim.stats.errors.get("DescribeSubnets:RequestLimitExceeded"), 1);
  } finally {
    ec2.destroy();
    await sim.close();
  }
});

Deno.test("scenario faults apply from the start: a mutating bucket of one", async () => {
  const scenario = {
    ...smallScenario(),
    faults: { throttle: true, buckets: { mutating: { capacity: 1, refillPerSecond: 0 } } },
  };
  const sim = await startSim({ scenario });
  const ec2 = sdkClient(sim);
  try {
    await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: IDS.internalSubnet }));
    const err = await rejection(() =>
      ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: IDS.internalSubnet }))
    );
    assert.equal(err.name, "RequestLimitExceeded");
    assert.equal(sim.state.enis.size, 3 + 1, "the throttled create made nothing");
    await ec2.send(new DescribeSubnetsCommand({})); // describes are another category
  } finally {
    ec2.destroy();
    await sim.close();
  }
});

Deno.test("injected 5xx are InternalError/Unavailable, change nothing, and the SDK retries them", async () => {
  let next = 0;
  const draws = [0.1, 0.1, 0.9, 0.9, 0.9, 0.9];
  const sim = await startSim({
    scenario: smallScenario(),
    random: () => draws[next++ % draws.length],
  });
  const strict = sdkClient(sim);
  const retrying = sdkClient(sim, 3);
  try {
    sim.faults.errorRate = 0.5;
    const before = sim.state.enis.size;
    const err = await rejection(() =>
      strict.send(new CreateNetworkInterfaceCommand({ SubnetId: IDS.internalSubnet }))
    );
    assert.ok(["InternalError", "Unavailable"].includes(err.name), err.name);
    assert.ok([500, 503].includes(err.$metadata!.httpStatusCode!));
    assert.equal(sim.state.enis.size, before);
    next = 0;
    const ok = await retrying.send(
      new CreateNetworkInterfaceCommand({ SubnetId: IDS.internalSubnet }),
    );
    assert.equal(ok.$metadata.attempts, 2);
    assert.equal(sim.state.enis.size, before + 1);

    sim.faults.errorRate = 0;
    sim.faults.throttleProbability = 1;
    const thr = await rejection(() => strict.send(new DescribeVpcsCommand({})));
    assert.equal(thr.name, "RequestLimitExceeded");
  } finally {
    strict.destroy();
    retrying.destroy();
    await sim.close();
  }
});

Deno.test("eventual consistency: a new ENI is invisible to Describe until the delay passed", async () => {
  const sim = await startSim({ scenario: smallScenario() });
  const ec2 = sdkClient(sim);
  try {
    sim.faults.consistencyDelayMs = 300;
    const eni =
      (await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: IDS.internalSubnet })))
        .NetworkInterface!;
    const err = await rejection(() =>
      ec2.send(
        new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eni.NetworkInterfaceId!] }),
      )
    );
    assert.equal(err.name, "InvalidNetworkInterfaceID.NotFound");
    const attach = await rejection(() =>
      ec2.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: eni.NetworkInterfaceId,
          InstanceId: IDS.node,
          DeviceIndex: 1,
        }),
      )
    );
    assert.equal(attach.name, "InvalidNetworkInterfaceID.NotFound", "attach right after create");
    const listed = (await ec2.send(new DescribeNetworkInterfacesCommand({}))).NetworkInterfaces!;
    assert.ok(!listed.some((e) => e.NetworkInterfaceId === eni.NetworkInterfaceId));
    sim.faults.consistencyDelayMs = 0;
    const [d] = (await ec2.send(
      new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eni.NetworkInterfaceId!] }),
    ))
      .NetworkInterfaces!;
    assert.equal(d.NetworkInterfaceId, eni.NetworkInterfaceId);
  } finally {
    ec2.destroy();
    await sim.close();
  }
});

Deno.test("per-action latency delays the answer; the request log gets one line per request", async () => {
  const logFile = await Deno.makeTempFile({ prefix: "vfb-simlog-" });
  const sim = await startSim({ scenario: smallScenario(), log: logFile });
  const ec2 = sdkClient(sim);
  try {
    sim.faults.latencyMs.DescribeVpcs = 200;
    const t0 = performance.now();
    await ec2.send(new DescribeVpcsCommand({}));
    assert.ok(performance.now() - t0 >= 200, "answered before the injected latency");
    await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [IDS.publicSubnet] }));
    await rejection(() =>
      ec2.send(new DescribeSubnetsCommand({ SubnetIds: ["subnet-0000000000000dead"] }))
    );
  } finally {
    ec2.destroy();
    await sim.close();
  }
  try {
    const lines = (await Deno.readTextFile(logFile)).trim().split("\n");
    assert.equal(lines.length, 3);
    assert.match(lines[0], / ec2 DescribeVpcs 200 - /);
    assert.match(lines[2], / ec2 DescribeSubnets 400 InvalidSubnetID.NotFound /);
  } finally {
    await Deno.remove(logFile);
  }
});
