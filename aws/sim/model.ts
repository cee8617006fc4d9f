/**
 * The simulator's data model: instance-type limits, subnets, security groups, instances,
 * ENIs with their IPs, prefixes and attachments, and the change events.
 *
 * @module
 */
import type { Ipv4Cidr } from "../../base/ipv4.ts";
import type { Scenario } from "./scenario.ts";
import { LIMITS_TABLE } from "../limits_table.ts";

/** Network limits of an instance type. */
export interface TypeLimits {
  type: string;
  maxEnis: number;
  ipv4PerEni: number;
  hypervisor: string;
  bareMetal: boolean;
  /** `[cardIndex, maxEnis]` pairs. */
  networkCards: [number, number][];
  defaultCard: number;
  /** vCPUs when the scenario gives them (the embedded table does not). */
  vcpus?: number;
}

/** A subnet and its address book. */
export interface SubnetState {
  id: string;
  cidr: Ipv4Cidr;
  az: string;
  vpcId: string;
  tags: Map<string, string>;
  /** Addresses held by ENIs (IPs and every address of each prefix). */
  used: Set<number>;
  /** Next-fit cursors, so a freed address is not handed out again at once (as in AWS). */
  ipCursor: number;
  prefixCursor: number;
}

/** A security group. */
export interface SecurityGroupState {
  id: string;
  name: string;
  description: string;
  vpcId: string;
  tags: Map<string, string>;
}

/** A running instance. */
export interface InstanceState {
  id: string;
  limits: TypeLimits;
  az: string;
  subnetId: string;
  securityGroupIds: string[];
  tags: Map<string, string>;
  launchTime: Date;
  reservationId: string;
}

/** One private IPv4 address of an ENI. */
export interface PrivateIpState {
  address: string;
  primary: boolean;
  /** `Date.now()` when assigned; IMDS shows it `imdsDelayMs` later. */
  assignedAt: number;
}

/** One delegated /28 prefix of an ENI. */
export interface PrefixState {
  cidr: string;
  assignedAt: number;
}

/** An ENI's attachment to an instance. */
export interface AttachmentState {
  id: string;
  instanceId: string;
  deviceIndex: number;
  networkCardIndex: number;
  status: "attaching" | "attached" | "detaching";
  attachTime: Date;
  /** `Date.now()` when the attach completed (undefined while attaching). */
  attachedAt?: number;
  deleteOnTermination: boolean;
}

/** An Elastic Network Interface. */
export interface EniState {
  id: string;
  subnetId: string;
  vpcId: string;
  az: string;
  mac: string;
  description: string;
  privateIps: PrivateIpState[];
  prefixes: PrefixState[];
  groupIds: string[];
  tags: Map<string, string>;
  attachment?: AttachmentState;
  sourceDestCheck: boolean;
  /** `Date.now()` at creation; Describe hides it for `consistencyDelayMs`. */
  createdAt: number;
}

/** What changed, for followers such as the fabric. */
export interface SimEvent {
  kind:
    | "create"
    | "delete"
    | "attach"
    | "attached"
    | "detach"
    | "detached"
    | "assign"
    | "unassign"
    | "modify"
    | "tags";
  /** The ENI concerned (absent for tags on other resources). */
  eniId?: string;
}

/** Parameters of `SimState.createNetworkInterface`. */
export interface CreateEniParams {
  subnetId: string;
  groupIds?: string[];
  description?: string;
  privateIp?: string;
  /** Explicit secondary addresses. */
  secondaryIps?: string[];
  secondaryCount?: number;
  prefixCount?: number;
  tags?: Record<string, string>;
  clientToken?: string;
}

/** Parameters of `SimState.modifyNetworkInterfaceAttribute` (EC2 takes one per call). */
export interface ModifyEniParams {
  groups?: string[];
  description?: string;
  sourceDestCheck?: boolean;
  /** Names the attachment whose `deleteOnTermination` is set. */
  attachmentId?: string;
  deleteOnTermination?: boolean;
}

/** Parameters of `SimState.assignPrivateIps`. */
export interface AssignParams {
  count?: number;
  ips?: string[];
  prefixCount?: number;
  prefixes?: string[];
  allowReassignment?: boolean;
}

/** The limits of an instance type: scenario overrides first, then the embedded table. */
export function lookupTypeLimits(type: string, scenario?: Scenario): TypeLimits | undefined {
  const extra = scenario?.instanceTypes.find((t) => t.type === type);
  if (extra) {
    return {
      type,
      maxEnis: extra.maxEnis,
      ipv4PerEni: extra.ipv4PerEni,
      hypervisor: extra.hypervisor,
      bareMetal: extra.bareMetal,
      networkCards: [[0, extra.maxEnis]],
      defaultCard: 0,
      vcpus: extra.vcpus,
    };
  }
  const row = LIMITS_TABLE[type];
  if (!row) return undefined;
  return {
    type,
    maxEnis: row[0],
    ipv4PerEni: row[1],
    hypervisor: row[2],
    bareMetal: row[3],
    networkCards: row[4].map(([i, n]) => [i, n]),
    defaultCard: row[5],
  };
}

/** `n` random lowercase hex digits, for EC2-style ids and MACs. */
export function randomHex(n: number): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(Math.ceil(n / 2))),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("").slice(0, n);
}
