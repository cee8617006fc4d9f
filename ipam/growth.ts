/**
 * What growing a pool through EC2 rests on: the growth context, the tags on the ENIs the
 * daemon creates, the subnets a new ENI may go to, and assigning addresses to ENIs the pool
 * already holds. Creating, attaching and deleting ENIs is in ipam/eni_lifecycle.ts. The
 * growth service (ipam/growth_service.ts) makes growth single-flight per pool.
 *
 * @module
 */
import { type CloudApi, cloudErrorCode, type EniDescription, type SubnetInfo } from "./cloud.ts";
import type { DaemonConfig, PoolConfig, SubnetChoice } from "./config.ts";
import type { DaemonMetrics } from "./metrics.ts";
import { ipsPerEni, type ManagedEni, type NodeState } from "./node_state.ts";
import { matchSubnets, prefixAddresses } from "./subnets.ts";
import { log } from "./log.ts";

/** Why a pool cannot grow. */
export type ExhaustReason = "subnet_full" | "eni_limit";

/** Growth refused for a reason the operator must act on. */
export class PoolExhausted extends Error {
  /** Builds the refusal. */
  constructor(readonly reason: ExhaustReason, detail: string) {
    super(detail);
    this.name = "PoolExhausted";
  }
}

/** What growth needs to know about the node and the world. */
export interface GrowthContext {
  cfg: DaemonConfig;
  cloud: CloudApi;
  state: NodeState;
  metrics: DaemonMetrics;
  instanceId: string;
  az: string;
  primarySubnetId: string;
  maxEnis: number;
  ipv4PerEni: number;
  /** Device indexes held by ENIs the daemon does not manage. */
  foreignDeviceIndexes: Set<number>;
  /** Device indexes reserved by creations in flight. */
  reservedDeviceIndexes: Set<number>;
  /** Subnets of ENI creations in flight (one entry per creation). */
  reservedSubnets: string[];
  /** ENI ids created but not yet attached (the collector must not take them). */
  creating: Set<string>;
  /**
   * ENIs created for a pool whose attach EC2 throttled (so did not run): the pool's next
   * growth attaches one of them instead of paying the account's CreateNetworkInterface bucket
   * for another and its DeleteNetworkInterface bucket for this one. One never needed again is
   * "available" with our tags: the leaked-ENI collector deletes it after its grace.
   */
  spareEnis: { created: EniDescription; pool: string; subnet: SubnetInfo }[];
  subnets: SubnetInfo[];
  /** Brings `subnets` up to date if it is stale (the daemon's cache; absent in some tests). */
  refreshSubnets?: () => Promise<void>;
  /** Describes `subnets` if only IMDS has so far (their tags are needed to match a selector). */
  ensureSubnetsDescribed?: () => Promise<void>;
  /** Subnet id → epoch ms until which it counts as full. */
  fullSubnets: Map<string, number>;
  /**
   * Called whenever addresses were added, so waiting ADDs retry: set once, by the growth
   * service, to emit its `grew` event.
   */
  readonly onGrew: () => void;
  now: () => number;
  /** Random source of the weighted subnet choice (tests pin it). */
  random?: () => number;
  /**
   * Multiplies the built-in waits of attach and detach (IMDS polling, deadlines); 1 unless a
   * simulation runs AWS time scaled (bench/fleet).
   */
  timeScale?: number;
}

const SUBNET_FULL_MS = 60_000;

/** Subnets a pool may put a new ENI in, with room now. */
export function candidateSubnets(ctx: GrowthContext, choice: SubnetChoice): SubnetInfo[] {
  const now = ctx.now();
  return matchSubnets(choice, ctx.subnets, { az: ctx.az, primarySubnetId: ctx.primarySubnetId })
    .filter((s) => (ctx.fullSubnets.get(s.id) ?? 0) <= now);
}

/**
 * Records that EC2 refused addresses in a subnet for lack of room: it is not tried again for
 * a minute, and its cached free count drops to zero.
 */
export function markSubnetFull(ctx: GrowthContext, subnetId: string, pool: string): void {
  ctx.fullSubnets.set(subnetId, ctx.now() + SUBNET_FULL_MS);
  const s = ctx.subnets.find((x) => x.id === subnetId);
  if (s) s.availableIps = 0;
  log.warn("subnet {subnetId} is full (InsufficientFreeAddressesInSubnet), pool {pool}", {
    subnetId,
    pool,
    condition: "subnet_full",
  });
}

/** Assigns up to `need` addresses to existing ENIs of the pool; returns how many it got. */
export async function assignToExisting(
  ctx: GrowthContext,
  pool: PoolConfig,
  need: number,
): Promise<number> {
  let got = 0;
  for (const eni of ctx.state.poolEnis(pool.name)) {
    if (got >= need) break;
    if (eni.full || (ctx.fullSubnets.get(eni.subnetId) ?? 0) > ctx.now()) continue;
    got += await assignToEni(ctx, pool, eni, need - got);
  }
  return got;
}

/**
 * How many addresses to ask for when an ENI with `room` free slots is grown for `need`: in
 * batches, not one per call. A pool sized in ENIs fills the ENI (as the AWS VPC CNI does);
 * a pool sized in addresses asks for a whole warm batch at once.
 */
export function ipBatch(pool: PoolConfig, room: number, need: number): number {
  const batch = pool.warmEnis > 0 ? room : Math.max(pool.warmIps, 1);
  return Math.min(room, Math.max(need, batch));
}

/** How many /28 prefixes to ask for when an ENI with `room` free slots is grown for `need`. */
export function prefixBatch(room: number, need: number): number {
  return Math.min(room, Math.ceil(need / 16));
}

/**
 * Assigns addresses (or /28 prefixes) to one ENI of the pool, in a batch sized for `need`;
 * returns how many addresses it got. A full subnet or a full ENI yields 0, not an error.
 */
export async function assignToEni(
  ctx: GrowthContext,
  pool: PoolConfig,
  eni: ManagedEni,
  need: number,
): Promise<number> {
  const slots = ctx.ipv4PerEni - 1;
  try {
    if (pool.prefixDelegation) {
      const count = prefixBatch(slots - eni.prefixes.length, need);
      if (count <= 0) return 0;
      const prefixes = await ctx.cloud.assignPrefixes({ eniId: eni.id, count });
      let n = 0;
      for (const p of prefixes) {
        eni.prefixes.push(p);
        for (const ip of prefixAddresses(p)) {
          eni.ips.add(ip);
          n++;
        }
      }
      ctx.metrics.ipsAssigned.inc({ pool: pool.name }, n);
      ctx.onGrew();
      return n;
    }
    const count = ipBatch(pool, slots - eni.ips.size, need);
    if (count <= 0) return 0;
    const ips = await ctx.cloud.assignIps({ eniId: eni.id, count });
    for (const ip of ips) eni.ips.add(ip);
    const s = ctx.subnets.find((x) => x.id === eni.subnetId);
    if (s) s.availableIps = Math.max(0, s.availableIps - ips.length);
    ctx.metrics.ipsAssigned.inc({ pool: pool.name }, ips.length);
    log.debug("assigned {count} addresses to {eniId}", { count: ips.length, eniId: eni.id });
    ctx.onGrew();
    return ips.length;
  } catch (e) {
    const code = cloudErrorCode(e) ?? "Unknown";
    if (code === "InsufficientFreeAddressesInSubnet") {
      markSubnetFull(ctx, eni.subnetId, pool.name);
      return 0;
    }
    if (code === "PrivateIpAddressLimitExceeded") {
      eni.full = true;
      return 0;
    }
    throw e;
  }
}

/** The number of addresses one ENI of this pool holds when full. */
export function perEniCapacity(pool: PoolConfig, ctx: GrowthContext): number {
  return ipsPerEni(pool, ctx.ipv4PerEni);
}
