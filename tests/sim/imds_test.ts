/**
 * The simulator's IMDSv2: tokens, the metadata paths the daemon reads, one endpoint per
 * instance, and ENIs/IPs that show up only after attach plus the IMDS delay. Read with raw
 * HTTP and with the real `@aws-sdk/ec2-metadata-service` client.
 */
import assert from "node:assert/strict";
import { MetadataService } from "@aws-sdk/ec2-metadata-service";
import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
} from "@aws-sdk/client-ec2";
import { startSim } from "../../aws/sim/mod.ts";
import { IDS, sdkClient, smallScenario } from "./sim_helpers.ts";

async function token(endpoint: string, ttl = "60"): Promise<string> {
  const r = await fetch(`${endpoint}/latest/api/token`, {
    method: "PUT",
    headers: { "x-aws-ec2-metadata-token-ttl-seconds": ttl },
  });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("x-aws-ec2-metadata-token-ttl-seconds"), ttl);
  return await r.text();
}

async function get(
  endpoint: string,
  path: string,
  tok?: string,
): Promise<{ status: number; text: string }> {
  const r = await fetch(`${endpoint}/latest/meta-data/${path}`, {
    headers: tok ? { "x-aws-ec2-metadata-token": tok } : {},
  });
  return { status: r.status, text: await r.text() };
}

Deno.test("IMDSv2 needs a token: 401 without one, 400 for a bad TTL", async () => {
  const sim = await startSim({ scenario: smallScenario() });
  try {
    assert.equal((await get(sim.imdsEndpoint, "instance-id")).status, 401);
    assert.equal((await get(sim.imdsEndpoint, "instance-id", "forged")).status, 401);
    for (const ttl of ["0", "21601", "x"]) {
      const r = await fetch(`${sim.imdsEndpoint}/latest/api/token`, {
        method: "PUT",
        headers: { "x-aws-ec2-metadata-token-ttl-seconds": ttl },
      });
      await r.body?.cancel();
      assert.equal(r.status, 400, `ttl ${ttl}`);
    }
    const tok = await token(sim.imdsEndpoint);
    assert.deepEqual(await get(sim.imdsEndpoint, "instance-id", tok), {
      status: 200,
      text: IDS.node,
    });
    const proxied = await fetch(`${sim.imdsEndpoint}/latest/api/token`, {
      method: "PUT",
      headers: { "x-aws-ec2-metadata-token-ttl-seconds": "60", "x-forwarded-for": "10.9.9.9" },
    });
    await proxied.body?.cancel();
    assert.equal(proxied.status, 403, "a token request through a proxy is refused");
    const short = await token(sim.imdsEndpoint, "1");
    assert.equal((await get(sim.imdsEndpoint, "instance-id", short)).status, 200);
    await new Promise((r) => setTimeout(r, 1100));
    assert.equal(
      (await get(sim.imdsEndpoint, "instance-id", short)).status,
      401,
      "an expired token is refused",
    );
  } finally {
    await sim.close();
  }
});

Deno.test("IMDS serves the instance and each ENI by MAC, one endpoint per instance", async () => {
  const sim = await startSim({ scenario: smallScenario() });
  try {
    const ep = sim.imdsEndpointFor(IDS.node);
    assert.equal(ep, sim.imdsEndpoint);
    const tok = await token(ep);
    const v = async (p: string) => {
      const r = await get(ep, p, tok);
      assert.equal(r.status, 200, p);
      return r.text;
    };
    assert.equal(await v("instance-type"), "m5.large");
    assert.equal(await v("placement/availability-zone"), "us-east-1a");
    assert.equal(await v("placement/region"), "us-east-1");
    assert.equal(await v("local-ipv4"), "10.0.0.10");
    const primary = sim.state.enisOf(IDS.node)[0];
    assert.equal(await v("mac"), primary.mac);
    assert.equal(await v("network/interfaces/macs/"), `${primary.mac}/`);
    const base = `network/interfaces/macs/${primary.mac}/`;
    assert.equal(await v(base + "device-number"), "0");
    assert.equal(await v(base + "interface-id"), primary.id);
    assert.equal(await v(base + "subnet-id"), IDS.publicSubnet);
    assert.equal(await v(base + "subnet-ipv4-cidr-block"), "10.0.0.0/24");
    assert.equal(await v(base + "vpc-ipv4-cidr-blocks"), "10.0.0.0/16");
    assert.equal(await v(base + "vpc-id"), IDS.vpc);
    assert.equal(await v(base + "local-ipv4s"), "10.0.0.10");
    assert.equal(await v(base + "security-group-ids"), IDS.sgDefault);
    assert.equal((await get(ep, base + "ipv4-prefix", tok)).status, 404);
    assert.equal((await get(ep, "no/such/path", tok)).status, 404);

    const other = sim.imdsEndpointFor(IDS.tinyNode);
    assert.notEqual(other, ep);
    assert.equal((await get(other, "instance-id", await token(other))).text, IDS.tinyNode);
    assert.equal((await get(other, "instance-id", tok)).status, 401, "tokens are per instance");
    assert.throws(() => sim.imdsEndpointFor("i-0000000000000dead"), /no instance/);
  } finally {
    await sim.close();
  }
});

Deno.test("IMDS shows an attached ENI and new IPs only after attach completes plus the IMDS delay", async () => {
  const sim = await startSim({ scenario: smallScenario() });
  const ec2 = sdkClient(sim);
  try {
    sim.faults.attachDelayMs = 150;
    sim.faults.imdsDelayMs = 150;
    const eni =
      (await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: IDS.internalSubnet })))
        .NetworkInterface!;
    await ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: eni.NetworkInterfaceId,
        InstanceId: IDS.node,
        DeviceIndex: 1,
      }),
    );
    const tok = await token(sim.imdsEndpoint);
    const macs = async () =>
      (await get(sim.imdsEndpoint, "network/interfaces/macs/", tok)).text.split("\n");
    assert.equal(sim.state.enis.get(eni.NetworkInterfaceId!)!.attachment!.status, "attaching");
    assert.equal((await macs()).length, 1, "not visible while attaching");
    // Poll (bounded) until it shows: the delay is a floor, never asserted as a timing.
    let seen = false;
    for (let i = 0; i < 100 && !seen; i++) {
      seen = (await macs()).includes(`${eni.MacAddress}/`);
      if (!seen) await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(seen, "the ENI appears in IMDS after attach");
    const a = sim.state.enis.get(eni.NetworkInterfaceId!)!.attachment!;
    assert.equal(a.status, "attached");
    assert.ok(Date.now() >= a.attachedAt! + 150, "not before attach completion plus the delay");
    const base = `network/interfaces/macs/${eni.MacAddress}/`;
    assert.equal((await get(sim.imdsEndpoint, base + "device-number", tok)).text, "1");

    const assigned = await ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: eni.NetworkInterfaceId,
        SecondaryPrivateIpAddressCount: 1,
      }),
    );
    const ip = assigned.AssignedPrivateIpAddresses![0].PrivateIpAddress!;
    assert.ok(
      !(await get(sim.imdsEndpoint, base + "local-ipv4s", tok)).text.includes(ip),
      "a new IP lags in IMDS",
    );
    sim.faults.imdsDelayMs = 0;
    assert.deepEqual((await get(sim.imdsEndpoint, base + "local-ipv4s", tok)).text.split("\n"), [
      eni.PrivateIpAddress,
      ip,
    ]);
  } finally {
    ec2.destroy();
    await sim.close();
  }
});

Deno.test("the SDK's MetadataService reads the simulator", async () => {
  const sim = await startSim({ scenario: smallScenario() });
  try {
    const md = new MetadataService({ endpoint: sim.imdsEndpoint, ec2MetadataV1Disabled: true });
    assert.equal(await md.request("/latest/meta-data/instance-id", {}), IDS.node);
    assert.equal(await md.request("/latest/meta-data/placement/region", {}), "us-east-1");
  } finally {
    await sim.close();
  }
});
