/**
 * What the daemon needs from AWS, as one narrow interface. The real implementation
 * (ipam/aws_cloud.ts) wraps aws/ec2.ts, aws/imds.ts and aws/limits.ts; keeping the core
 * behind this seam lets the pool logic stay free of SDK shapes.
 *
 * @module
 */
import type { NodeEni as ImdsNodeEni, NodeMetadata as ImdsNodeMetadata } from "../aws/imds.ts";

/** One ENI as the node's metadata shows it (IMDS's shape; the primary address first). */
export type NodeEni = Omit<ImdsNodeEni, "networkCard">;

/** What IMDS says about this node, as far as the daemon needs it. */
export type NodeMetadata =
  & Pick<ImdsNodeMetadata, "instanceId" | "instanceType" | "az" | "region" | "vpcCidrs">
  & { enis: NodeEni[] };

/** A subnet as EC2 describes it. */
export interface SubnetInfo {
  id: string;
  cidr: string;
  az: string;
  vpcId?: string;
  availableIps: number;
  tags: Record<string, string>;
}

/** A security group as EC2 describes it. */
export interface SecurityGroupInfo {
  id: string;
  name: string;
  tags: Record<string, string>;
}

/** An ENI as EC2 describes it. */
export interface EniDescription {
  id: string;
  subnetId: string;
  mac: string;
  status: string;
  /** Present while attached. */
  attachment?: { id: string; instanceId?: string; deviceIndex: number; status: string };
  /** Primary address first. */
  privateIps: string[];
  prefixes: string[];
  tags: Record<string, string>;
  securityGroupIds: string[];
}

/** Instance limits that bound how far a node's pools can grow. */
export interface InstanceLimits {
  maxEnis: number;
  ipv4PerEni: number;
}

/** The AWS surface the daemon uses. */
export interface CloudApi {
  nodeMetadata(): Promise<NodeMetadata>;
  /**
   * MACs (lower case) of the ENIs IMDS shows attached to this node now. IMDS is not counted
   * against the EC2 API budget, so this is how an attach is waited for.
   */
  attachedMacs(): Promise<string[]>;
  instanceLimits(instanceType: string): Promise<InstanceLimits>;
  describeSubnets(vpcCidrHint: { az: string }): Promise<SubnetInfo[]>;
  describeSecurityGroups(): Promise<SecurityGroupInfo[]>;
  /** ENIs with these tag values (exact match on each key). */
  describeTaggedEnis(tags: Record<string, string>): Promise<EniDescription[]>;
  describeEnis(ids: string[]): Promise<EniDescription[]>;
  /** ENIs attached, attaching or detaching to this instance (one call, whatever their tags). */
  describeAttachedEnis(instanceId: string): Promise<EniDescription[]>;
  /**
   * Creates an ENI, with `secondaryIpCount` secondary addresses or `prefixCount` /28 prefixes
   * assigned in the same call (one call instead of two).
   */
  createEni(o: {
    subnetId: string;
    securityGroupIds: string[];
    description: string;
    tags: Record<string, string>;
    clientToken: string;
    secondaryIpCount?: number;
    prefixCount?: number;
  }): Promise<EniDescription>;
  attachEni(o: { eniId: string; instanceId: string; deviceIndex: number }): Promise<string>;
  setDeleteOnTermination(o: { eniId: string; attachmentId: string }): Promise<void>;
  detachEni(attachmentId: string): Promise<void>;
  deleteEni(eniId: string): Promise<void>;
  assignIps(o: { eniId: string; count: number }): Promise<string[]>;
  assignPrefixes(o: { eniId: string; count: number }): Promise<string[]>;
  unassignIps(o: { eniId: string; ips: string[] }): Promise<void>;
  unassignPrefixes(o: { eniId: string; prefixes: string[] }): Promise<void>;
  /** Releases connections (optional). */
  close?(): void;
  /** Counters for metrics, keyed `action` and `action:code`. */
  callCounts(): {
    calls: Map<string, number>;
    errors: Map<string, number>;
    throttles: number;
  };
}

/** Reads the AWS error code of an error, if it has one. */
export function cloudErrorCode(err: unknown): string | undefined {
  if (err && typeof err === "object" && "code" in err && typeof err.code === "string") {
    return err.code;
  }
  if (err && typeof err === "object" && "name" in err && typeof err.name === "string") {
    return err.name;
  }
  return undefined;
}
