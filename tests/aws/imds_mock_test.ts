/**
 * The IMDS client against amazon-ec2-metadata-mock (IMDSv2-only mode), plus the endpoint
 * failure tests. The mock serves one ENI; its values are set through its config file.
 */
import type { NodeMetadata } from "../../aws/imds.ts";
import { type PeerProcess, startMetadataMock } from "../helpers/aws_peers.ts";
import { imdsFailureTests, imdsSuite } from "./imds_suite.ts";

const MAC = "0a:1b:2c:3d:4e:5f";

/** Mock config: paths of every per-MAC key moved to MAC, and the values we expect back. */
function mockConfig() {
  const macKeys: Record<string, string> = {
    "mac-device-number": "device-number",
    "mac-network-interface-id": "interface-id",
    "mac-subnet-id": "subnet-id",
    "mac-subnet-ipv4-cidr-block": "subnet-ipv4-cidr-block",
    "mac-local-ipv4s": "local-ipv4s",
    "mac-security-group-ids": "security-group-ids",
    "mac-vpc-id": "vpc-id",
    "mac-vpc-ipv4-cidr-block": "vpc-ipv4-cidr-block",
    "mac-vpc-ipv4-cidr-blocks": "vpc-ipv4-cidr-blocks",
    "mac-mac": "mac",
    "mac-network-interface-card-index": "network-card-index",
  };
  const paths: Record<string, string> = {};
  for (const [k, leaf] of Object.entries(macKeys)) {
    paths[k] = `/latest/meta-data/network/interfaces/macs/${MAC}/${leaf}`;
  }
  return {
    metadata: {
      paths,
      values: {
        "instance-id": "i-0aaaabbbbccccdddd",
        "instance-type": "m5.xlarge",
        "mac": MAC,
        "mac-mac": MAC,
        "mac-device-number": "0",
        "mac-network-interface-card-index": "0",
        "mac-network-interface-id": "eni-0123456789abcdef0",
        "mac-subnet-id": "subnet-0feedfacecafe0001",
        "mac-subnet-ipv4-cidr-block": "10.20.0.0/20",
        "mac-local-ipv4s": "10.20.1.10\n10.20.1.11\n10.20.1.12",
        "mac-security-group-ids": "sg-0aaa000000000001\nsg-0aaa000000000002",
        "mac-vpc-id": "vpc-0abc0abc0abc0abc0",
        "mac-vpc-ipv4-cidr-block": "10.20.0.0/16",
        "mac-vpc-ipv4-cidr-blocks": "10.20.0.0/16\n100.64.0.0/16",
        "placement-availability-zone": "eu-west-1b",
        "placement-region": "eu-west-1",
      },
    },
  };
}

const EXPECTED: NodeMetadata = {
  instanceId: "i-0aaaabbbbccccdddd",
  instanceType: "m5.xlarge",
  az: "eu-west-1b",
  region: "eu-west-1",
  vpcId: "vpc-0abc0abc0abc0abc0",
  vpcCidrs: ["10.20.0.0/16", "100.64.0.0/16"],
  primaryMac: MAC,
  enis: [{
    mac: MAC,
    deviceIndex: 0,
    networkCard: 0,
    eniId: "eni-0123456789abcdef0",
    subnetId: "subnet-0feedfacecafe0001",
    subnetCidr: "10.20.0.0/20",
    localIpv4s: ["10.20.1.10", "10.20.1.11", "10.20.1.12"],
    ipv4Prefixes: [],
    securityGroupIds: ["sg-0aaa000000000001", "sg-0aaa000000000002"],
  }],
};

imdsSuite("metadata-mock", async () => {
  let mock: PeerProcess = await startMetadataMock({ imdsv2Only: true, config: mockConfig() });
  return {
    endpoint: mock.endpoint,
    expected: EXPECTED,
    invalidateTokens: async () => {
      const port = mock.port;
      await mock.close();
      mock = await startMetadataMock({ imdsv2Only: true, config: mockConfig(), port });
    },
    close: () => mock.close(),
  };
});

imdsFailureTests();
