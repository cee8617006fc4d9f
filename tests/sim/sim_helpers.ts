/**
 * Shared pieces of the simulator tests: a small scenario and a real SDK client for it.
 *
 * @module
 */
import { EC2Client } from "@aws-sdk/client-ec2";
import type { ScenarioInput, SimServer } from "../../aws/sim/mod.ts";

/** Instance and subnet ids of {@linkcode smallScenario}. */
export const IDS = {
  vpc: "vpc-0000000000000aaaa",
  publicSubnet: "subnet-00000000000000a1",
  internalSubnet: "subnet-00000000000000a2",
  tinySubnet: "subnet-00000000000000a3",
  otherAzSubnet: "subnet-00000000000000b1",
  sgDefault: "sg-000000000000000d1",
  sgPods: "sg-000000000000000d2",
  node: "i-000000000000000a1",
  tinyNode: "i-000000000000000a2",
  xenNode: "i-000000000000000a3",
} as const;

/** A VPC with public/internal subnets, a /28, a tiny instance type and a Xen instance. */
export function smallScenario(): ScenarioInput {
  return {
    region: "us-east-1",
    vpc: { id: IDS.vpc, cidrs: ["10.0.0.0/16"] },
    subnets: [
      { id: IDS.publicSubnet, cidr: "10.0.0.0/24", az: "us-east-1a", tags: { zone: "public" } },
      {
        id: IDS.internalSubnet,
        cidr: "10.0.16.0/20",
        az: "us-east-1a",
        tags: { zone: "internal" },
      },
      { id: IDS.tinySubnet, cidr: "10.0.1.0/28", az: "us-east-1a", tags: { zone: "tiny" } },
      { id: IDS.otherAzSubnet, cidr: "10.0.2.0/24", az: "us-east-1b", tags: { zone: "public" } },
    ],
    securityGroups: [
      { id: IDS.sgDefault, name: "default" },
      { id: IDS.sgPods, name: "pods", tags: { role: "pods" } },
    ],
    instanceTypes: [{ type: "test.tiny", maxEnis: 2, ipv4PerEni: 3, vcpus: 2 }],
    instances: [
      {
        id: IDS.node,
        type: "m5.large",
        subnet: IDS.publicSubnet,
        securityGroups: [IDS.sgDefault],
        primaryIp: "10.0.0.10",
      },
      {
        id: IDS.tinyNode,
        type: "test.tiny",
        subnet: IDS.publicSubnet,
        securityGroups: [IDS.sgDefault],
      },
      {
        id: IDS.xenNode,
        type: "c4.large",
        subnet: IDS.publicSubnet,
        securityGroups: [IDS.sgDefault],
      },
    ],
  };
}

/** A real SDK client pointed at the simulator, with retries off so errors surface as-is. */
export function sdkClient(sim: SimServer, maxAttempts = 1): EC2Client {
  return new EC2Client({
    endpoint: sim.ec2Endpoint,
    region: sim.state.region,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts,
  });
}

/** Runs `fn` and returns the error it throws (fails when it does not throw). */
export async function rejection(
  fn: () => Promise<unknown>,
): Promise<Error & { name: string; $metadata?: { httpStatusCode?: number } }> {
  try {
    await fn();
  } catch (e) {
    return e as Error & { $metadata?: { httpStatusCode?: number } };
  }
  throw new Error("expected the call to fail, but it succeeded");
}
