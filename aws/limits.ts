/**
 * Instance limits (ENIs per instance, IPv4 addresses per ENI) and the max-pods arithmetic.
 *
 * Limits come from DescribeInstanceTypes when EC2 answers (cached per type), and from the
 * embedded table generated from `instance-limits.tsv` otherwise. This module imports no SDK:
 * the EC2 side is any object with a `describeInstanceTypes` method, such as `Ec2Client`.
 *
 * @module
 */
import { LIMITS_TABLE } from "./limits_table.ts";

/** ENIs a single network card can hold. */
export interface NetworkCardLimit {
  index: number;
  maxEnis: number;
}

/** What an instance type allows, network-wise. */
export interface InstanceLimits {
  instanceType: string;
  /** ENIs usable on the default network card (what the VPC CNI counts). */
  maxEnis: number;
  /** IPv4 addresses per ENI, the primary address included. */
  ipv4PerEni: number;
  hypervisor: string;
  bareMetal: boolean;
  networkCards?: NetworkCardLimit[];
  defaultCard?: number;
  /** Default vCPUs, when known (DescribeInstanceTypes gives it; the table does not). */
  vcpus?: number;
  /** Whether IPv4 /28 prefix delegation is supported, when known. */
  prefixDelegation?: boolean;
  /** Where these numbers came from. */
  source?: "ec2" | "embedded";
}

/** Limits for `type` from the embedded table, or `undefined` for an unknown type. */
export function embeddedLimits(type: string): InstanceLimits | undefined {
  const row = Object.hasOwn(LIMITS_TABLE, type) ? LIMITS_TABLE[type] : undefined;
  if (!row) return undefined;
  const [maxEnis, ipv4PerEni, hypervisor, bareMetal, cards, defaultCard] = row;
  return {
    instanceType: type,
    maxEnis,
    ipv4PerEni,
    hypervisor,
    bareMetal,
    networkCards: cards.map(([index, n]) => ({ index, maxEnis: n })),
    defaultCard,
    source: "embedded",
  };
}

/** Every instance type the embedded table knows, sorted. */
export function embeddedInstanceTypes(): string[] {
  return Object.keys(LIMITS_TABLE);
}

/** Options for {@linkcode maxPods}. */
export interface MaxPodsOptions {
  /**
   * Count /28 prefixes (16 addresses per secondary slot) instead of single IPs. The answer
   * is arithmetic only: check {@linkcode supportsPrefixDelegation} first (Xen types cannot).
   */
  prefixDelegation?: boolean;
  /** Pods do not take addresses from the primary ENI (e.g. pods live in other subnets). */
  excludePrimaryEni?: boolean;
  /** Use at most this many ENIs (at least 1; lowers, never raises, the instance's count). */
  maxEnis?: number;
  /**
   * Cap as kubelet deployments do: `true` gives 110, or 250 above 30 vCPUs; a number gives
   * that cap. When the vCPUs are unknown the cap is 110, the lower (safe) value.
   */
  cap?: boolean | number;
  /** vCPUs of the instance, for the cap; overrides `limits.vcpus`. */
  vcpus?: number;
}

/** Kubelet's customary max-pods ceiling on small instances. */
export const MAX_PODS_CAP_SMALL = 110;
/** The ceiling above {@linkcode MAX_PODS_CAP_VCPU_THRESHOLD} vCPUs. */
export const MAX_PODS_CAP_LARGE = 250;
/** Instances with more vCPUs than this get {@linkcode MAX_PODS_CAP_LARGE}. */
export const MAX_PODS_CAP_VCPU_THRESHOLD = 30;

function checkCount(name: string, v: number | undefined, min: number): void {
  if (v !== undefined && (!Number.isInteger(v) || v < min)) {
    throw new RangeError(`maxPods: ${name} must be an integer >= ${min}, got ${v}`);
  }
}

/**
 * Pods the node can hold: `enis × (ips − 1) + 2` with secondary IPs, or
 * `enis × (ips − 1) × 16 + 2` with prefix delegation (the `+ 2` are host-network pods
 * such as kube-proxy and the CNI itself). Options lower the ENI count and apply the cap.
 */
export function maxPods(limits: InstanceLimits, o: MaxPodsOptions = {}): number {
  checkCount("limits.maxEnis", limits.maxEnis, 1);
  checkCount("limits.ipv4PerEni", limits.ipv4PerEni, 1);
  checkCount("maxEnis", o.maxEnis, 1);
  checkCount("vcpus", o.vcpus, 1);
  if (typeof o.cap === "number") checkCount("cap", o.cap, 1);
  let enis = Math.min(limits.maxEnis, o.maxEnis ?? limits.maxEnis);
  if (o.excludePrimaryEni) enis -= 1;
  const perEni = (limits.ipv4PerEni - 1) * (o.prefixDelegation ? 16 : 1);
  const pods = enis * perEni + 2;
  if (o.cap === undefined || o.cap === false) return pods;
  return Math.min(pods, typeof o.cap === "number" ? o.cap : kubeletCap(o.vcpus ?? limits.vcpus));
}

/**
 * Whether the type can take /28 prefixes: Nitro instances and bare metal (which the table
 * lists with hypervisor `unknown`) can; Xen instances cannot.
 */
export function supportsPrefixDelegation(l: InstanceLimits): boolean {
  return l.prefixDelegation ?? (l.hypervisor === "nitro" || l.bareMetal);
}

/** 110, or 250 for more than 30 vCPUs; 110 when vCPUs are unknown. */
export function kubeletCap(vcpus: number | undefined): number {
  return vcpus !== undefined && vcpus > MAX_PODS_CAP_VCPU_THRESHOLD
    ? MAX_PODS_CAP_LARGE
    : MAX_PODS_CAP_SMALL;
}

/** The part of DescribeInstanceTypes that limits need (as `Ec2Client` returns it). */
export interface InstanceTypeInfo {
  instanceType: string;
  maxEnis: number;
  ipv4PerEni: number;
  hypervisor?: string;
  bareMetal?: boolean;
  vcpus?: number;
  networkCards?: NetworkCardLimit[];
  defaultCard?: number;
  prefixDelegation?: boolean;
}

/** Anything that can describe instance types (an `Ec2Client`, or a test double). */
export interface InstanceTypeSource {
  describeInstanceTypes(types: string[]): Promise<InstanceTypeInfo[]>;
}

/** Options for {@linkcode InstanceLimitsResolver}. */
export interface InstanceLimitsResolverOptions {
  /** Where DescribeInstanceTypes comes from; without it only the embedded table is used. */
  ec2?: InstanceTypeSource;
  /** Called when EC2 fails and the table is used instead (for a log line). */
  onFallback?: (type: string, error: unknown) => void;
}

/**
 * Resolves limits per instance type: DescribeInstanceTypes first (each answer cached for the
 * life of the resolver — limits of a type never change), the embedded table when EC2 fails
 * or does not know the type, and a clear error when neither knows it.
 */
export class InstanceLimitsResolver {
  #cache = new Map<string, InstanceLimits>();
  #o: InstanceLimitsResolverOptions;

  /** Creates a resolver; see {@linkcode InstanceLimitsResolverOptions}. */
  constructor(o: InstanceLimitsResolverOptions = {}) {
    this.#o = o;
  }

  /** Limits of `type`; throws when neither EC2 nor the embedded table knows it. */
  async get(type: string): Promise<InstanceLimits> {
    const cached = this.#cache.get(type);
    if (cached) return cached;
    let ec2Error: unknown;
    if (this.#o.ec2) {
      try {
        const [info] = (await this.#o.ec2.describeInstanceTypes([type]))
          .filter((i) => i.instanceType === type);
        if (info) {
          const fromEc2 = fromInstanceTypeInfo(info);
          this.#cache.set(type, fromEc2);
          return fromEc2;
        }
      } catch (e) {
        ec2Error = e;
      }
    }
    const embedded = embeddedLimits(type);
    if (!embedded) {
      const why = ec2Error ? ` (DescribeInstanceTypes failed: ${(ec2Error as Error).message})` : "";
      throw new Error(`unknown instance type '${type}': not in the embedded limits table${why}`);
    }
    if (ec2Error) this.#o.onFallback?.(type, ec2Error);
    // A fallback is not cached when EC2 failed, so a later call can still get EC2's answer.
    if (!ec2Error) this.#cache.set(type, embedded);
    return embedded;
  }
}

/** Converts a DescribeInstanceTypes answer to limits. */
export function fromInstanceTypeInfo(i: InstanceTypeInfo): InstanceLimits {
  const out: InstanceLimits = {
    instanceType: i.instanceType,
    maxEnis: i.maxEnis,
    ipv4PerEni: i.ipv4PerEni,
    hypervisor: i.hypervisor ?? "unknown",
    bareMetal: i.bareMetal ?? false,
    source: "ec2",
  };
  if (i.networkCards?.length) out.networkCards = i.networkCards;
  if (i.defaultCard !== undefined) out.defaultCard = i.defaultCard;
  if (i.vcpus !== undefined) out.vcpus = i.vcpus;
  if (i.prefixDelegation !== undefined) out.prefixDelegation = i.prefixDelegation;
  // EC2 reports the instance's total across cards; pods only use the default card's ENIs.
  const card = out.networkCards?.find((c) => c.index === (out.defaultCard ?? 0));
  if (card && card.maxEnis < out.maxEnis) out.maxEnis = card.maxEnis;
  return out;
}
