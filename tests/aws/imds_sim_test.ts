/**
 * The IMDS client suite against the simulator's IMDS. The world is the EC2 suite's scenario
 * plus a second ENI (secondary IPs and a /28 prefix) attached through the real EC2 client;
 * what IMDS must show is taken from EC2's own answers, so the two views are cross-checked.
 */
import assert from "node:assert/strict";
import { Ec2Client } from "../../aws/ec2.ts";
import { ImdsClient, type NodeEni, type NodeMetadata } from "../../aws/imds.ts";
import { type SimServer, startSim } from "../../aws/sim/mod.ts";
import { freePortRun } from "../helpers/aws_peers.ts";
import { SUITE_SCENARIO, SUITE_WORLD } from "./sim_world.ts";
import { imdsSuite } from "./imds_suite.ts";

const INSTANCE = SUITE_WORLD.instanceId;
const CREDS = { accessKeyId: "test", secretAccessKey: "test" };

async function seedAndExpect(sim: SimServer): Promise<NodeMetadata> {
  const c = new Ec2Client({
    region: sim.state.region,
    endpoint: sim.ec2Endpoint,
    credentials: CREDS,
  });
  try {
    const [inst] = await c.describeInstances({ ids: [INSTANCE] });
    const eni = await c.createNetworkInterface({
      subnetId: SUITE_WORLD.subnetId,
      securityGroupIds: [SUITE_WORLD.securityGroupIds[1]],
    });
    await c.assignPrivateIpAddresses({ eniId: eni.eniId, count: 2 });
    await c.assignPrivateIpAddresses({ eniId: eni.eniId, prefixCount: 1 });
    await c.attachNetworkInterface({ eniId: eni.eniId, instanceId: INSTANCE, deviceIndex: 1 });
    const enis = await c.describeNetworkInterfaces({ instanceId: INSTANCE });
    const subnets = new Map((await c.describeSubnets()).map((s) => [s.subnetId, s.cidr]));
    const [vpc] = await c.describeVpcs();
    const nodeEnis: NodeEni[] = enis.map((e) => ({
      mac: e.mac,
      deviceIndex: e.attachment!.deviceIndex,
      networkCard: e.attachment!.networkCardIndex ?? 0,
      eniId: e.eniId,
      subnetId: e.subnetId,
      subnetCidr: subnets.get(e.subnetId)!,
      localIpv4s: e.privateIps.map((p) => p.ip),
      ipv4Prefixes: e.ipv4Prefixes,
      securityGroupIds: e.securityGroupIds,
    })).sort((a, b) => a.deviceIndex - b.deviceIndex);
    // IMDS lists addresses in its own order; the primary first is what matters.
    for (const e of nodeEnis) e.localIpv4s = [e.localIpv4s[0], ...e.localIpv4s.slice(1).sort()];
    return {
      instanceId: INSTANCE,
      instanceType: inst.instanceType,
      az: inst.az,
      region: sim.state.region,
      vpcId: vpc.vpcId,
      vpcCidrs: vpc.cidrs,
      primaryMac: nodeEnis[0].mac,
      enis: nodeEnis,
    };
  } finally {
    c.close();
  }
}

/** Waits until IMDS shows what EC2 shows (IMDS lags attaches on purpose). */
async function waitForImds(endpoint: string, expected: NodeMetadata): Promise<void> {
  const c = new ImdsClient({ endpoint });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const enis = await c.getEnis();
    if (enis.length === expected.enis.length) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("IMDS did not show the attached ENI within 10 s");
}

function sortIps(md: NodeMetadata): NodeMetadata {
  for (const e of md.enis) e.localIpv4s = [e.localIpv4s[0], ...e.localIpv4s.slice(1).sort()];
  return md;
}

imdsSuite("sim", async () => {
  // Fixed ports (EC2, then one IMDS port), so a restarted simulator answers at the same place.
  const start = async () => {
    for (let tries = 0;; tries++) {
      const port = freePortRun(2);
      try {
        return { port, sim: await startSim({ scenario: SUITE_SCENARIO, port }) };
      } catch (e) {
        if (!(e instanceof Deno.errors.AddrInUse) || tries >= 5) throw e;
      }
    }
  };
  const first = await start();
  const port = first.port;
  let sim = first.sim;
  const endpoint = sim.imdsEndpointFor(INSTANCE);
  let expected: NodeMetadata;
  try {
    expected = await seedAndExpect(sim);
    await waitForImds(endpoint, expected);
  } catch (e) {
    await sim.close();
    throw e;
  }
  return {
    endpoint,
    expected,
    normalize: sortIps,
    invalidateTokens: async () => {
      // A restarted simulator knows none of the old tokens (same ports, same scenario).
      await sim.close();
      sim = await startSim({ scenario: SUITE_SCENARIO, port });
    },
    close: () => sim.close(),
  };
});

Deno.test({
  name: "imds[sim]: one token serves every read until it nears its TTL",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const log = await Deno.makeTempFile({ prefix: "vpcni-imds-log-" });
    const sim = await startSim({ scenario: SUITE_SCENARIO, log });
    try {
      const c = new ImdsClient({ endpoint: sim.imdsEndpointFor(INSTANCE) });
      await c.getNodeMetadata();
      await c.getNodeMetadata();
      const lines = (await Deno.readTextFile(log)).split("\n").filter((l) => l.includes(" imds "));
      const puts = lines.filter((l) => / PUT \/latest\/api\/token 200/.test(l));
      const gets = lines.filter((l) => / GET /.test(l));
      assert.equal(puts.length, 1, lines.join("\n"));
      assert.ok(gets.length >= 20, `${gets.length} reads`);
    } finally {
      await sim.close();
      await Deno.remove(log);
    }
  },
});

Deno.test({
  name: "imds[sim]: waitForEni returns once IMDS shows an attach, and times out naming the ENI",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const sim = await startSim({ scenario: SUITE_SCENARIO });
    sim.faults.attachDelayMs = 150;
    sim.faults.imdsDelayMs = 300;
    const c = new Ec2Client({
      region: sim.state.region,
      endpoint: sim.ec2Endpoint,
      credentials: CREDS,
    });
    try {
      const imds = new ImdsClient({ endpoint: sim.imdsEndpointFor(INSTANCE) });
      const eni = await c.createNetworkInterface({
        subnetId: SUITE_WORLD.subnetId,
        securityGroupIds: [],
      });
      await c.assignPrivateIpAddresses({ eniId: eni.eniId, count: 2 });
      await c.attachNetworkInterface({ eniId: eni.eniId, instanceId: INSTANCE, deviceIndex: 1 });
      assert.equal((await imds.getEnis()).some((e) => e.eniId === eni.eniId), false, "not yet");
      const seen = await imds.waitForEni(eni.eniId, {
        timeoutMs: 10_000,
        intervalMs: 50,
        minIpv4s: 3,
      });
      assert.equal(seen.deviceIndex, 1);
      assert.equal(seen.mac, eni.mac);
      await assert.rejects(
        imds.waitForEni("eni-0000000000000dead", { timeoutMs: 200, intervalMs: 50 }),
        /eni-0000000000000dead not shown after 200 ms/,
      );
    } finally {
      c.close();
      await sim.close();
    }
  },
});
