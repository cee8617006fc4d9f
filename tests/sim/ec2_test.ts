/**
 * The simulator's EC2 Query API through the real `@aws-sdk/client-ec2`: every action the
 * daemon calls, the shapes the SDK parses, and EC2's errors for limits and bad input.
 */
import assert from "node:assert/strict";
import {
  type _InstanceType,
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  CreateTagsCommand,
  DeleteNetworkInterfaceCommand,
  DescribeInstancesCommand,
  DescribeInstanceTypesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  DetachNetworkInterfaceCommand,
  type EC2Client,
  ModifyNetworkInterfaceAttributeCommand,
  paginateDescribeNetworkInterfaces,
  UnassignPrivateIpAddressesCommand,
} from "@aws-sdk/client-ec2";
import { startSim } from "../../aws/sim/mod.ts";
import type { SimServer } from "../../aws/sim/mod.ts";
import { IDS, rejection, sdkClient, smallScenario } from "./sim_helpers.ts";

async function withSim(fn: (sim: SimServer, ec2: EC2Client) => Promise<void>): Promise<void> {
  const sim = await startSim({ scenario: smallScenario() });
  const ec2 = sdkClient(sim);
  try {
    await fn(sim, ec2);
  } finally {
    ec2.destroy();
    await sim.close();
  }
}

async function createEni(ec2: EC2Client, subnetId: string = IDS.internalSubnet, extra = {}) {
  const r = await ec2.send(
    new CreateNetworkInterfaceCommand({ SubnetId: subnetId, Groups: [IDS.sgPods], ...extra }),
  );
  return r.NetworkInterface!;
}

Deno.test("describe calls return the scenario's VPC, subnets, groups, instances and types", async () => {
  await withSim(async (_sim, ec2) => {
    const vpcs = (await ec2.send(new DescribeVpcsCommand({}))).Vpcs!;
    assert.equal(vpcs.length, 1);
    assert.equal(vpcs[0].VpcId, IDS.vpc);
    assert.deepEqual(vpcs[0].CidrBlockAssociationSet!.map((a) => a.CidrBlock), ["10.0.0.0/16"]);

    const internal = (await ec2.send(
      new DescribeSubnetsCommand({
        Filters: [{ Name: "tag:zone", Values: ["internal"] }, {
          Name: "vpc-id",
          Values: [IDS.vpc],
        }],
      }),
    )).Subnets!;
    assert.deepEqual(internal.map((s) => s.SubnetId), [IDS.internalSubnet]);
    assert.equal(internal[0].CidrBlock, "10.0.16.0/20");
    assert.equal(internal[0].AvailableIpAddressCount, 4096 - 5);
    assert.deepEqual(internal[0].Tags, [{ Key: "zone", Value: "internal" }]);

    const inB = (await ec2.send(
      new DescribeSubnetsCommand({
        Filters: [{ Name: "availability-zone", Values: ["us-east-1b"] }],
      }),
    )).Subnets!;
    assert.deepEqual(inB.map((s) => s.SubnetId), [IDS.otherAzSubnet]);
    const tagged = (await ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: "tag-key", Values: ["zone"] }] }),
    ))
      .Subnets!;
    assert.equal(tagged.length, 4);
    const byId = (await ec2.send(
      new DescribeSubnetsCommand({
        Filters: [{ Name: "subnet-id", Values: [IDS.tinySubnet, IDS.publicSubnet] }],
      }),
    )).Subnets!;
    assert.deepEqual(byId.map((s) => s.SubnetId).sort(), [IDS.publicSubnet, IDS.tinySubnet].sort());
    const wild = (await ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: "tag:zone", Values: ["pub*"] }] }),
    ))
      .Subnets!;
    assert.equal(wild.length, 2);

    const sgs = (await ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [IDS.sgPods] })))
      .SecurityGroups!;
    assert.equal(sgs[0].GroupName, "pods");
    assert.equal(sgs[0].VpcId, IDS.vpc);

    const res = (await ec2.send(new DescribeInstancesCommand({ InstanceIds: [IDS.node] })))
      .Reservations!;
    const inst = res[0].Instances![0];
    assert.equal(inst.InstanceType, "m5.large");
    assert.equal(inst.PrivateIpAddress, "10.0.0.10");
    assert.equal(inst.Placement!.AvailabilityZone, "us-east-1a");
    assert.equal(inst.State!.Name, "running");
    assert.equal(inst.NetworkInterfaces!.length, 1);
    assert.equal(inst.NetworkInterfaces![0].Attachment!.DeviceIndex, 0);
    assert.equal(inst.NetworkInterfaces![0].Groups![0].GroupId, IDS.sgDefault);

    const types = (await ec2.send(
      new DescribeInstanceTypesCommand({
        InstanceTypes: ["m5.large", "test.tiny"] as _InstanceType[],
      }),
    ))
      .InstanceTypes!;
    const m5 = types.find((t) => t.InstanceType === "m5.large")!;
    assert.equal(m5.NetworkInfo!.MaximumNetworkInterfaces, 3);
    assert.equal(m5.NetworkInfo!.Ipv4AddressesPerInterface, 10);
    assert.equal(m5.Hypervisor, "nitro");
    const tiny = types.find((t) => (t.InstanceType as string) === "test.tiny")!;
    assert.equal(tiny.NetworkInfo!.MaximumNetworkInterfaces, 2);
    assert.equal(tiny.VCpuInfo!.DefaultVCpus, 2, "a scenario type reports its vCPUs");
    assert.equal(m5.VCpuInfo, undefined, "the embedded table has no vCPU counts");
    const err = await rejection(() =>
      ec2.send(
        new DescribeInstanceTypesCommand({
          InstanceTypes: ["m5.nope"] as string[] as _InstanceType[],
        }),
      )
    );
    assert.equal(err.name, "InvalidInstanceType");
  });
});

Deno.test("create, attach, assign, unassign, detach and delete an ENI; Describe shows each step", async () => {
  await withSim(async (sim, ec2) => {
    const eni = await createEni(ec2, IDS.internalSubnet, {
      Description: "vpcni pool eni",
      SecondaryPrivateIpAddressCount: 2,
      TagSpecifications: [{
        ResourceType: "network-interface",
        Tags: [{ Key: "cluster", Value: "demo" }],
      }],
    });
    const id = eni.NetworkInterfaceId!;
    assert.match(id, /^eni-[0-9a-f]{17}$/);
    assert.equal(eni.Status, "available");
    assert.equal(eni.PrivateIpAddresses!.length, 3);
    assert.equal(eni.PrivateIpAddresses!.filter((p) => p.Primary).length, 1);
    assert.deepEqual(eni.TagSet, [{ Key: "cluster", Value: "demo" }]);
    assert.deepEqual(eni.Groups, [{ GroupId: IDS.sgPods, GroupName: "pods" }]);
    assert.match(eni.MacAddress!, /^02(:[0-9a-f]{2}){5}$/);
    assert.equal(eni.Description, "vpcni pool eni");

    const att = await ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: id,
        InstanceId: IDS.node,
        DeviceIndex: 1,
      }),
    );
    assert.match(att.AttachmentId!, /^eni-attach-[0-9a-f]{17}$/);

    const ips = await ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: id,
        SecondaryPrivateIpAddressCount: 2,
      }),
    );
    assert.equal(ips.AssignedPrivateIpAddresses!.length, 2);
    const explicit = await ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: id,
        PrivateIpAddresses: ["10.0.20.7"],
      }),
    );
    assert.deepEqual(explicit.AssignedPrivateIpAddresses!.map((a) => a.PrivateIpAddress), [
      "10.0.20.7",
    ]);
    const px = await ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: id, Ipv4PrefixCount: 1 }),
    );
    const prefix = px.AssignedIpv4Prefixes![0].Ipv4Prefix!;
    assert.match(prefix, /^10\.0\.(1[6-9]|2\d|3[01])\.\d+\/28$/);
    assert.equal(Number(prefix.split("/")[0].split(".")[3]) % 16, 0);

    const [d] =
      (await ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [id] })))
        .NetworkInterfaces!;
    assert.equal(d.Status, "in-use");
    assert.equal(d.Attachment!.InstanceId, IDS.node);
    assert.equal(d.Attachment!.DeviceIndex, 1);
    assert.equal(d.Attachment!.Status, "attached");
    assert.equal(d.Attachment!.AttachmentId, att.AttachmentId);
    assert.equal(d.PrivateIpAddresses!.length, 6);
    assert.deepEqual(d.Ipv4Prefixes, [{ Ipv4Prefix: prefix }]);

    const mine = (await ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [{ Name: "attachment.instance-id", Values: [IDS.node] }],
      }),
    )).NetworkInterfaces!;
    assert.equal(mine.length, 2);
    const tagged = (await ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [{ Name: "tag:cluster", Values: ["demo"] }, {
          Name: "subnet-id",
          Values: [IDS.internalSubnet],
        }],
      }),
    )).NetworkInterfaces!;
    assert.deepEqual(tagged.map((e) => e.NetworkInterfaceId), [id]);

    await ec2.send(
      new UnassignPrivateIpAddressesCommand({
        NetworkInterfaceId: id,
        PrivateIpAddresses: ["10.0.20.7"],
      }),
    );
    await ec2.send(
      new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: id, Ipv4Prefixes: [prefix] }),
    );
    const primaryIp = d.PrivateIpAddress!;
    const e1 = await rejection(() =>
      ec2.send(
        new UnassignPrivateIpAddressesCommand({
          NetworkInterfaceId: id,
          PrivateIpAddresses: [primaryIp],
        }),
      )
    );
    assert.equal(e1.name, "InvalidParameterValue");
    const after = sim.state.enis.get(id)!;
    assert.equal(after.privateIps.length, 5);
    assert.equal(after.prefixes.length, 0);

    const inUse = await rejection(() =>
      ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: id }))
    );
    assert.equal(inUse.name, "InvalidNetworkInterface.InUse");
    await ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: att.AttachmentId }));
    const available = (await ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [{ Name: "status", Values: ["available"] }],
      }),
    )).NetworkInterfaces!;
    assert.deepEqual(available.map((e) => e.NetworkInterfaceId), [id]);
    const usedBefore = sim.state.subnets.get(IDS.internalSubnet)!.used.size;
    await ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: id }));
    assert.equal(sim.state.enis.has(id), false);
    assert.equal(sim.state.subnets.get(IDS.internalSubnet)!.used.size, usedBefore - 5);
    const gone = await rejection(() =>
      ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [id] }))
    );
    assert.equal(gone.name, "InvalidNetworkInterfaceID.NotFound");
  });
});

Deno.test("a repeated ClientToken returns the same ENI; other parameters with it are refused", async () => {
  await withSim(async (sim, ec2) => {
    const a = await createEni(ec2, IDS.internalSubnet, { ClientToken: "token-1" });
    const b = await createEni(ec2, IDS.internalSubnet, { ClientToken: "token-1" });
    assert.equal(a.NetworkInterfaceId, b.NetworkInterfaceId);
    assert.equal(
      [...sim.state.enis.values()].filter((e) => e.subnetId === IDS.internalSubnet).length,
      1,
    );
    const err = await rejection(() => createEni(ec2, IDS.publicSubnet, { ClientToken: "token-1" }));
    assert.equal(err.name, "IdempotentParameterMismatch");
  });
});

Deno.test("DryRun answers DryRunOperation (412) and changes nothing", async () => {
  await withSim(async (sim, ec2) => {
    const before = sim.state.enis.size;
    const err = await rejection(() => createEni(ec2, IDS.internalSubnet, { DryRun: true }));
    assert.equal(err.name, "DryRunOperation");
    assert.equal(err.$metadata?.httpStatusCode, 412);
    assert.equal(sim.state.enis.size, before);
    const bad = await rejection(() => createEni(ec2, "subnet-0000000000000dead", { DryRun: true }));
    assert.equal(bad.name, "InvalidSubnetID.NotFound");
  });
});

Deno.test("DescribeNetworkInterfaces pages with MaxResults and NextToken", async () => {
  await withSim(async (_sim, ec2) => {
    const made = new Set<string>();
    for (let i = 0; i < 12; i++) made.add((await createEni(ec2)).NetworkInterfaceId!);
    const first = await ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 5 }));
    assert.equal(first.NetworkInterfaces!.length, 5);
    assert.ok(first.NextToken);
    const seen: string[] = [];
    for await (const page of paginateDescribeNetworkInterfaces({ client: ec2, pageSize: 5 }, {})) {
      seen.push(...page.NetworkInterfaces!.map((e) => e.NetworkInterfaceId!));
    }
    assert.equal(seen.length, 12 + 3); // plus the three primary ENIs
    for (const id of made) assert.ok(seen.includes(id));
    const err = await rejection(() =>
      ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 2 }))
    );
    assert.equal(err.name, "InvalidParameterValue");
  });
});

Deno.test("instance limits: ENIs per instance, addresses per ENI, prefixes only on Nitro", async () => {
  await withSim(async (_sim, ec2) => {
    const e1 = await createEni(ec2, IDS.publicSubnet);
    const e2 = await createEni(ec2, IDS.publicSubnet);
    await ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: e1.NetworkInterfaceId,
        InstanceId: IDS.tinyNode,
        DeviceIndex: 1,
      }),
    );
    const over = await rejection(() =>
      ec2.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: e2.NetworkInterfaceId,
          InstanceId: IDS.tinyNode,
          DeviceIndex: 2,
        }),
      )
    );
    assert.equal(over.name, "AttachmentLimitExceeded");

    await ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: e1.NetworkInterfaceId,
        SecondaryPrivateIpAddressCount: 2,
      }),
    );
    const ipOver = await rejection(() =>
      ec2.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: e1.NetworkInterfaceId,
          SecondaryPrivateIpAddressCount: 1,
        }),
      )
    );
    assert.equal(ipOver.name, "PrivateIpAddressLimitExceeded");

    const busy = await rejection(() =>
      ec2.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: e2.NetworkInterfaceId,
          InstanceId: IDS.node,
          DeviceIndex: 0,
        }),
      )
    );
    assert.equal(busy.name, "InvalidParameterValue");

    await ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: e2.NetworkInterfaceId,
        InstanceId: IDS.xenNode,
        DeviceIndex: 1,
      }),
    );
    const xen = await rejection(() =>
      ec2.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: e2.NetworkInterfaceId,
          Ipv4PrefixCount: 1,
        }),
      )
    );
    assert.equal(xen.name, "InvalidParameterValue");

    const otherAz = await createEni(ec2, IDS.otherAzSubnet);
    const az = await rejection(() =>
      ec2.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: otherAz.NetworkInterfaceId,
          InstanceId: IDS.node,
          DeviceIndex: 2,
        }),
      )
    );
    assert.equal(az.name, "InvalidParameterCombination");
  });
});

Deno.test("a /28 subnet gives 11 addresses, never the 5 AWS reserves, then InsufficientFreeAddressesInSubnet", async () => {
  await withSim(async (sim, ec2) => {
    const eni = await createEni(ec2, IDS.tinySubnet, { SecondaryPrivateIpAddressCount: 10 });
    const got = eni.PrivateIpAddresses!.map((p) => Number(p.PrivateIpAddress!.split(".")[3])).sort((
      a,
      b,
    ) => a - b);
    assert.deepEqual(got, [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
    const [sn] = (await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [IDS.tinySubnet] })))
      .Subnets!;
    assert.equal(sn.AvailableIpAddressCount, 0);
    const before = sim.state.enis.size;
    const err = await rejection(() => createEni(ec2, IDS.tinySubnet));
    assert.equal(err.name, "InsufficientFreeAddressesInSubnet");
    assert.equal(sim.state.enis.size, before);
    const reserved = await rejection(() =>
      createEni(ec2, IDS.publicSubnet, { PrivateIpAddress: "10.0.0.255" })
    );
    assert.equal(reserved.name, "InvalidParameterValue");
    const taken = await rejection(() =>
      createEni(ec2, IDS.publicSubnet, { PrivateIpAddress: "10.0.0.10" })
    );
    assert.equal(taken.name, "InvalidIPAddress.InUse");
  });
});

Deno.test("unknown ids give EC2's NotFound codes", async () => {
  await withSim(async (_sim, ec2) => {
    const eni = await createEni(ec2);
    const cases: [string, () => Promise<unknown>][] = [
      [
        "InvalidNetworkInterfaceID.NotFound",
        () =>
          ec2.send(
            new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: "eni-0000000000000beef" }),
          ),
      ],
      ["InvalidSubnetID.NotFound", () => createEni(ec2, "subnet-0000000000000beef")],
      [
        "InvalidSubnetID.NotFound",
        () => ec2.send(new DescribeSubnetsCommand({ SubnetIds: ["subnet-0000000000000beef"] })),
      ],
      [
        "InvalidGroup.NotFound",
        () =>
          ec2.send(
            new CreateNetworkInterfaceCommand({
              SubnetId: IDS.internalSubnet,
              Groups: ["sg-0000000000000beef"],
            }),
          ),
      ],
      [
        "InvalidGroup.NotFound",
        () =>
          ec2.send(
            new ModifyNetworkInterfaceAttributeCommand({
              NetworkInterfaceId: eni.NetworkInterfaceId,
              Groups: ["sg-0000000000000beef"],
            }),
          ),
      ],
      [
        "InvalidInstanceID.NotFound",
        () =>
          ec2.send(
            new AttachNetworkInterfaceCommand({
              NetworkInterfaceId: eni.NetworkInterfaceId,
              InstanceId: "i-0000000000000beef",
              DeviceIndex: 1,
            }),
          ),
      ],
      [
        "InvalidInstanceID.NotFound",
        () => ec2.send(new DescribeInstancesCommand({ InstanceIds: ["i-0000000000000beef"] })),
      ],
      [
        "InvalidAttachmentID.NotFound",
        () =>
          ec2.send(
            new DetachNetworkInterfaceCommand({ AttachmentId: "eni-attach-0000000000000beef" }),
          ),
      ],
    ];
    for (const [code, call] of cases) {
      const err = await rejection(call);
      assert.equal(err.name, code, `${code}: got ${err.name}: ${err.message}`);
      assert.equal(err.$metadata?.httpStatusCode, 400);
    }
  });
});

Deno.test("the primary ENI cannot be detached; tags and attributes can be changed", async () => {
  await withSim(async (sim, ec2) => {
    const primary = sim.state.enisOf(IDS.node)[0];
    const err = await rejection(() =>
      ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: primary.attachment!.id }))
    );
    assert.equal(err.name, "OperationNotPermitted");
    await ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: primary.id,
        Attachment: { AttachmentId: primary.attachment!.id, DeleteOnTermination: false },
      }),
    );
    await ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: primary.id,
        Groups: [IDS.sgPods, IDS.sgDefault],
      }),
    );
    await ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: primary.id,
        SourceDestCheck: { Value: false },
      }),
    );
    await ec2.send(
      new CreateTagsCommand({
        Resources: [primary.id, IDS.publicSubnet],
        Tags: [{ Key: "owner", Value: "vpcni" }],
      }),
    );
    const [d] = (await ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [{ Name: "tag:owner", Values: ["vpcni"] }],
      }),
    )).NetworkInterfaces!;
    assert.equal(d.NetworkInterfaceId, primary.id);
    assert.equal(d.Attachment!.DeleteOnTermination, false);
    assert.equal(d.SourceDestCheck, false);
    assert.deepEqual(d.Groups!.map((g) => g.GroupId), [IDS.sgPods, IDS.sgDefault]);
    const [sn] = (await ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: "tag:owner", Values: ["vpcni"] }] }),
    )).Subnets!;
    assert.equal(sn.SubnetId, IDS.publicSubnet);
  });
});

Deno.test("malformed requests get EC2's error document and status", async () => {
  await withSim(async (sim) => {
    const post = async (body: string) => {
      const r = await fetch(sim.ec2Endpoint, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body,
      });
      return { status: r.status, text: await r.text() };
    };
    const unknown = await post("Action=RunInstances&Version=2016-11-15");
    assert.equal(unknown.status, 400);
    assert.match(
      unknown.text,
      /^<\?xml[^>]*>\s*<Response><Errors><Error><Code>InvalidAction<\/Code><Message>[^<]+<\/Message><\/Error><\/Errors><RequestID>[0-9a-f-]{36}<\/RequestID><\/Response>$/,
    );
    const missing = await post("Action=AttachNetworkInterface&Version=2016-11-15&InstanceId=i-1");
    assert.equal(missing.status, 400);
    assert.match(missing.text, /<Code>MissingParameter<\/Code><Message>[^<]*NetworkInterfaceId/);
    const badInt = await post(
      `Action=AssignPrivateIpAddresses&Version=2016-11-15&NetworkInterfaceId=${
        sim.state.enisOf(IDS.node)[0].id
      }&SecondaryPrivateIpAddressCount=two`,
    );
    assert.match(badInt.text, /<Code>InvalidParameterValue<\/Code>/);
    const badFilter = await post(
      "Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=colour&Filter.1.Value.1=red",
    );
    assert.match(
      badFilter.text,
      /<Code>InvalidParameterValue<\/Code><Message>The filter 'colour' is invalid/,
    );
    const typo = await post("Action=DescribeSubnets&Version=2016-11-15&SubnetIds.1=subnet-1");
    assert.match(
      typo.text,
      /<Code>UnknownParameter<\/Code><Message>The parameter SubnetIds.1 is not recognized/,
    );
    const v6 = await post(
      `Action=CreateNetworkInterface&Version=2016-11-15&SubnetId=${IDS.publicSubnet}&Ipv6AddressCount=1`,
    );
    assert.match(
      v6.text,
      /<Code>InvalidParameterValue<\/Code><Message>The parameter Ipv6AddressCount is valid/,
    );
    const noAction = await post("Version=2016-11-15");
    assert.match(noAction.text, /<Code>MissingParameter<\/Code>/);
  });
});

Deno.test("scenario ENIs exist from the start, attached with their addresses", async () => {
  const sim = await startSim({
    scenario: `${new URL("../../examples/scenarios/warm-node.yaml", import.meta.url).pathname}`,
  });
  const ec2 = sdkClient(sim);
  try {
    sim.faults.imdsDelayMs = 60_000; // seeded ENIs are old: no delay applies to them
    const enis = (await ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [{ Name: "tag:vpcni.io/cluster", Values: ["demo"] }],
      }),
    )).NetworkInterfaces!;
    const attached = enis.find((e) => e.NetworkInterfaceId === "eni-0feed000000000a1")!;
    assert.equal(attached.Attachment!.Status, "attached");
    assert.equal(attached.Attachment!.DeviceIndex, 1);
    assert.equal(attached.PrivateIpAddresses!.length, 6);
    assert.equal(attached.Ipv4Prefixes!.length, 1);
    const leftover = enis.find((e) => e.NetworkInterfaceId === "eni-0feed000000000b2")!;
    assert.equal(leftover.Status, "available");
    const tok = await (await fetch(`${sim.imdsEndpoint}/latest/api/token`, {
      method: "PUT",
      headers: { "x-aws-ec2-metadata-token-ttl-seconds": "60" },
    })).text();
    const macs =
      await (await fetch(`${sim.imdsEndpoint}/latest/meta-data/network/interfaces/macs/`, {
        headers: { "x-aws-ec2-metadata-token": tok },
      })).text();
    assert.equal(macs.split("\n").length, 2);
    assert.ok(macs.includes(attached.MacAddress!));
  } finally {
    ec2.destroy();
    await sim.close();
  }
});

Deno.test("a scenario ENI that breaks a limit is refused with its field", async () => {
  const scenario = {
    ...smallScenario(),
    networkInterfaces: [{
      subnet: IDS.publicSubnet,
      secondaryIps: 3,
      attachment: { instance: IDS.tinyNode, deviceIndex: 1 },
    }],
  };
  await assert.rejects(
    startSim({ scenario }),
    /networkInterfaces\[0\]: PrivateIpAddressLimitExceeded/,
  );
  const clash = {
    ...smallScenario(),
    networkInterfaces: [
      { subnet: IDS.publicSubnet, attachment: { instance: IDS.node, deviceIndex: 1 } },
      { subnet: IDS.publicSubnet, attachment: { instance: IDS.node, deviceIndex: 1 } },
    ],
  };
  await assert.rejects(
    startSim({ scenario: clash }),
    /networkInterfaces\[1\]\.attachment\.deviceIndex: device index 1/,
  );
});

Deno.test("CreateNetworkInterface takes explicit addresses, one of them primary", async () => {
  await withSim(async (sim, ec2) => {
    const eni = await createEni(ec2, IDS.publicSubnet, {
      PrivateIpAddresses: [
        { PrivateIpAddress: "10.0.0.50" },
        { PrivateIpAddress: "10.0.0.40", Primary: true },
        { PrivateIpAddress: "10.0.0.60" },
      ],
    });
    assert.equal(eni.PrivateIpAddress, "10.0.0.40");
    assert.deepEqual(
      eni.PrivateIpAddresses!.map((p) => `${p.PrivateIpAddress}${p.Primary ? "*" : ""}`),
      ["10.0.0.40*", "10.0.0.50", "10.0.0.60"],
    );
    const used = sim.state.subnets.get(IDS.publicSubnet)!.used.size;
    const clash = await rejection(() =>
      createEni(ec2, IDS.publicSubnet, {
        PrivateIpAddresses: [{ PrivateIpAddress: "10.0.0.70", Primary: true }, {
          PrivateIpAddress: "10.0.0.50",
        }],
      })
    );
    assert.equal(clash.name, "InvalidIPAddress.InUse");
    assert.equal(
      sim.state.subnets.get(IDS.publicSubnet)!.used.size,
      used,
      "the failed create took nothing",
    );
  });
});
