/**
 * The world the aws/ tests run in on the simulator, as a scenario, and the same world as the
 * EC2 suite describes it.
 *
 * @module
 */
import type { ScenarioInput } from "../../aws/sim/mod.ts";
import type { Ec2World } from "./ec2_suite.ts";

export const REGION = "eu-central-1";

/** The world the suite expects, as a simulator scenario. */
export const SUITE_SCENARIO: ScenarioInput = {
  region: REGION,
  vpc: { id: "vpc-0c0ffee000000001", cidrs: ["10.42.0.0/16", "100.64.0.0/16"] },
  subnets: [
    {
      id: "subnet-0c0ffee000000001",
      cidr: "10.42.0.0/20",
      az: `${REGION}a`,
      tags: { "vpcni-zone": "pods" },
    },
    {
      id: "subnet-0c0ffee000000002",
      cidr: "100.64.0.0/20",
      az: `${REGION}b`,
      tags: { "vpcni-zone": "other" },
    },
    { id: "subnet-0c0ffee000000003", cidr: "10.42.16.0/28", az: `${REGION}a` },
  ],
  securityGroups: [
    { id: "sg-0c0ffee000000001", name: "vpcni-nodes" },
    { id: "sg-0c0ffee000000002", name: "vpcni-pods" },
  ],
  instances: [{
    id: "i-0c0ffee000000001",
    type: "t3.medium",
    subnet: "subnet-0c0ffee000000001",
    securityGroups: ["sg-0c0ffee000000001", "sg-0c0ffee000000002"],
  }],
} as ScenarioInput;

/** {@linkcode SUITE_SCENARIO} in the EC2 suite's terms. */
export const SUITE_WORLD: Ec2World = {
  vpcId: "vpc-0c0ffee000000001",
  vpcCidrs: ["10.42.0.0/16", "100.64.0.0/16"],
  subnetId: "subnet-0c0ffee000000001",
  subnetCidr: "10.42.0.0/20",
  az: `${REGION}a`,
  otherSubnetId: "subnet-0c0ffee000000002",
  tinySubnetId: "subnet-0c0ffee000000003",
  accountId: "123456789012",
  securityGroupIds: ["sg-0c0ffee000000001", "sg-0c0ffee000000002"],
  instanceId: "i-0c0ffee000000001",
  instanceType: "t3.medium",
};
