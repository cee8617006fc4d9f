/**
 * The aws/ec2 suite against moto's EC2 server (`moto_server`, PyPI `moto[server]`), started
 * on a free loopback port. One server for the file; each test resets it and seeds a world.
 */
import * as sdk from "@aws-sdk/client-ec2";
import { type PeerProcess, startMoto } from "../helpers/aws_peers.ts";
import { ec2FilterSuite } from "./ec2_filter_suite.ts";
import { ec2ParitySuite } from "./ec2_parity_suite.ts";
import { ec2FailureTests, ec2Suite, type Ec2Target, type Quirk } from "./ec2_suite.ts";
import type { FilteredAction } from "../../aws/ec2.ts";

const REGION = "us-east-1";
/** Where moto differs from EC2 (each one is asserted by the suite). */
const MOTO_QUIRKS: Quirk[] = [
  "assignAnswersAllIps",
  "noPrefixDelegation",
  "clientTokenIgnored",
  "noEniLimit",
  "noIpLimit",
  "deviceIndexReuse",
  "noPagination",
  "noFaultInjection",
  "deleteInUse",
  "deleteOnTerminationIgnored",
  "unknownGroupAccepted",
  "tagsOnUnknownIds",
  "reattachAttached",
  "subnetOverfill",
  "unknownFilter500",
  "filtersAnswer500",
  "xmlnsWithoutSlash",
  "noPrivateDnsName",
  "requesterIdNotAccount",
  "errorXmlns",
];

/**
 * Filters EC2 documents that moto does not implement: it answers HTTP 500 with an HTML page
 * (found by sending each name the client may send). Only these cases are skipped for moto.
 */
const MOTO_FILTERS_500: Partial<Record<FilteredAction, string[]>> = {
  DescribeNetworkInterfaces: [
    "private-dns-name",
    "addresses.primary",
    "ipv4-prefix",
    "group-name",
    "attachment.device-index",
    "attachment.status",
    "attachment.delete-on-termination",
  ],
  DescribeInstances: [
    "instance-state-code",
    "network-interface.network-interface-id",
    "network-interface.addresses.private-ip-address",
  ],
};

let moto: Promise<PeerProcess> | undefined;
globalThis.addEventListener("unload", () => {
  moto?.then((m) => m.close());
});

async function seed(endpoint: string): Promise<Ec2Target["world"]> {
  const ec2 = new sdk.EC2Client({
    region: REGION,
    endpoint,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  try {
    const tag = (ResourceType: sdk.ResourceType, tags: Record<string, string>) => [{
      ResourceType,
      Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })),
    }];
    const vpc = (await ec2.send(new sdk.CreateVpcCommand({ CidrBlock: "10.42.0.0/16" }))).Vpc!;
    await ec2.send(
      new sdk.AssociateVpcCidrBlockCommand({ VpcId: vpc.VpcId, CidrBlock: "100.64.0.0/16" }),
    );
    const az = `${REGION}a`;
    const subnet = (await ec2.send(
      new sdk.CreateSubnetCommand({
        VpcId: vpc.VpcId,
        CidrBlock: "10.42.0.0/20",
        AvailabilityZone: az,
        TagSpecifications: tag("subnet", { "vpcni-zone": "pods" }),
      }),
    )).Subnet!;
    const other = (await ec2.send(
      new sdk.CreateSubnetCommand({
        VpcId: vpc.VpcId,
        CidrBlock: "100.64.0.0/20",
        AvailabilityZone: `${REGION}b`,
        TagSpecifications: tag("subnet", { "vpcni-zone": "other" }),
      }),
    )).Subnet!;
    const tiny = (await ec2.send(
      new sdk.CreateSubnetCommand({
        VpcId: vpc.VpcId,
        CidrBlock: "10.42.16.0/28",
        AvailabilityZone: az,
      }),
    )).Subnet!;
    const sgs: string[] = [];
    for (const name of ["vpcni-nodes", "vpcni-pods"]) {
      const g = await ec2.send(
        new sdk.CreateSecurityGroupCommand({
          VpcId: vpc.VpcId,
          GroupName: name,
          Description: name,
        }),
      );
      sgs.push(g.GroupId!);
    }
    const images = await ec2.send(new sdk.DescribeImagesCommand({ Owners: ["amazon"] }));
    const run = await ec2.send(
      new sdk.RunInstancesCommand({
        ImageId: images.Images![0].ImageId,
        InstanceType: "t3.medium",
        MinCount: 1,
        MaxCount: 1,
        SubnetId: subnet.SubnetId,
        SecurityGroupIds: sgs,
      }),
    );
    return {
      vpcId: vpc.VpcId!,
      vpcCidrs: ["10.42.0.0/16", "100.64.0.0/16"],
      subnetId: subnet.SubnetId!,
      subnetCidr: "10.42.0.0/20",
      az,
      otherSubnetId: other.SubnetId!,
      tinySubnetId: tiny.SubnetId!,
      accountId: "123456789012",
      securityGroupIds: sgs,
      instanceId: run.Instances![0].InstanceId!,
      instanceType: "t3.medium",
    };
  } finally {
    ec2.destroy();
  }
}

/** moto, reset, with the suite's world seeded. */
async function motoTarget(): Promise<Ec2Target> {
  moto ??= startMoto();
  const m = await moto;
  const reset = await fetch(`${m.endpoint}/moto-api/reset`, { method: "POST" });
  await reset.body?.cancel();
  if (!reset.ok) throw new Error(`moto reset failed: HTTP ${reset.status}`);
  return {
    endpoint: m.endpoint,
    region: REGION,
    world: await seed(m.endpoint),
    quirks: new Set(MOTO_QUIRKS),
    filtersAnswering500: MOTO_FILTERS_500,
    close: () => Promise.resolve(),
  };
}

ec2Suite("moto", motoTarget);
ec2FilterSuite("moto", motoTarget);
ec2ParitySuite("moto", motoTarget);

ec2FailureTests();
