/**
 * Growing and shrinking a pool through EC2: assign addresses to an ENI of the pool, else
 * create and attach a new ENI in the best matching subnet; give back surplus addresses and
 * empty ENIs. The caller (PoolManager) makes growth single-flight per pool.
 *
 * @module
 */
import { type CloudApi, cloudErrorCode, type EniDescription, type SubnetInfo } from "./cloud.ts";
import type { DaemonConfig, PoolConfig, SubnetChoice } from "./config.ts";
import type { DaemonMetrics } from "./metrics.ts";
import { ipsPerEni, type ManagedEni, type NodeState } from "./node_state.ts";
import { matchSubnets, pickSubnet, prefixAddresses } from "./subnets.ts";
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

/** Tag keys on ENIs the daemon creates. */
export const TAG_CLUSTER = "vpcni.io/cluster";
/** Instance the ENI was created for. */
export const TAG_INSTANCE = "vpcni.io/instance-id";
/** ISO time of creation. */
export const TAG_CREATED = "vpcni.io/created-at";
/** Pool the ENI serves. */
export const TAG_POOL = "vpcni.io/pool";

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
  subnets: SubnetInfo[];
  /** Brings `subnets` up to date if it is stale (the daemon's cache; absent in some tests). */
  refreshSubnets?: () => Promise<void>;
  /** Subnet id → epoch ms until which it counts as full. */
  fullSubnets: Map<string, number>;
  /** Called whenever addresses were added, so waiting ADDs retry. */
  onGrew: () => void;
  now: () => number;
  /** Random source of the weighted subnet choice (tests pin it). */
  random?: () => number;
}

const SUBNET_FULL_MS = 60_000;

/** Subnets a pool may put a new ENI in, with room now. */
export function candidateSubnets(ctx: GrowthContext, choice: SubnetChoice): SubnetInfo[] {
  const now = ctx.now();
  return matchSubnets(choice, ctx.subnets, { az: ctx.az, primarySubnetId: ctx.primarySubnetId })
    .filter((s) => (ctx.fullSubnets.get(s.id) ?? 0) <= now);
}

function markSubnetFull(ctx: GrowthContext, subnetId: string, pool: string) {
  ctx.fullSubnets.set(subnetId, ctx.now() + SUBNET_FULL_MS);
  const s = ctx.subnets.find((x) => x.id === subnetId);
  if (s) s.availableIps = 0;
  log.warn("subnet {subnetId} is full (InsufficientFreeAddressesInSubnet), pool {pool}", {
    subnetId,
    pool,
    condition: "subnet_full",
  });
}

function unreserve(ctx: GrowthContext, subnetId: string) {
  const i = ctx.reservedSubnets.indexOf(subnetId);
  if (i >= 0) ctx.reservedSubnets.splice(i, 1);
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
    got += await assignTo(ctx, pool, eni, need - got);
  }
  return got;
}

/**
 * How many addresses to ask for when an ENI with `room` free slots is grown for `need`: in
 * batches, not one per call. A pool sized in ENIs fills the ENI (as the AWS VPC CNI does);
 * a pool sized in addresses asks for a whole warm batch at once.
 */
function ipBatch(pool: PoolConfig, room: number, need: number): number {
  const batch = pool.warmEnis > 0 ? room : Math.max(pool.warmIps, 1);
  return Math.min(room, Math.max(need, batch));
}

/** How many /28 prefixes to ask for when an ENI with `room` free slots is grown for `need`. */
function prefixBatch(room: number, need: number): number {
  return Math.min(room, Math.ceil(need / 16));
}

async function assignTo(
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

/** Lowest free device index for a new ENI of this pool, or undefined at the limit. */
function freeDeviceIndex(ctx: GrowthContext, pool: PoolConfig): number | undefined {
  const used = ctx.state.usedDeviceIndexes([
    ...ctx.foreignDeviceIndexes,
    ...ctx.reservedDeviceIndexes,
  ]);
  if (used.size >= ctx.maxEnis) return undefined;
  for (let i = Math.max(1, pool.firstInterfaceIndex); i < ctx.maxEnis; i++) {
    if (!used.has(i)) return i;
  }
  return undefined;
}

/**
 * Creates, attaches and fills one new ENI for the pool. Throws {@linkcode PoolExhausted}
 * when the ENI limit or the subnets stop it.
 */
export async function addEni(
  ctx: GrowthContext,
  pool: PoolConfig,
  choice: SubnetChoice,
  securityGroupIds: string[],
  need: number,
): Promise<number> {
  const poolEnis = ctx.state.poolEnis(pool.name);
  if (pool.maxEnis !== undefined && poolEnis.length >= pool.maxEnis) {
    throw new PoolExhausted("eni_limit", `pool ${pool.name} holds its maxEnis (${pool.maxEnis})`);
  }
  const deviceIndex = freeDeviceIndex(ctx, pool);
  if (deviceIndex === undefined) {
    throw new PoolExhausted(
      "eni_limit",
      `instance ENI limit reached (${ctx.maxEnis} ENIs, first index ${pool.firstInterfaceIndex})`,
    );
  }
  ctx.reservedDeviceIndexes.add(deviceIndex);
  try {
    await ctx.refreshSubnets?.();
    const exclude = new Set<string>();
    if (!pool.allowSharedSubnets) {
      for (const e of ctx.state.enis.values()) exclude.add(e.subnetId);
      // ENIs being created right now (growth may add several at once) count as well.
      for (const id of ctx.reservedSubnets) exclude.add(id);
    }
    // A new ENI gets its first addresses in the create call itself (one EC2 call, not two),
    // unless a subnet just refused that many: then a bare ENI, filled after the attach.
    let withAddresses = true;
    for (;;) {
      const subnet = pickSubnet(candidateSubnets(ctx, choice), {
        minFree: 2,
        exclude,
        random: ctx.random,
      });
      if (!subnet) {
        throw new PoolExhausted(
          "subnet_full",
          `no subnet matching pool ${pool.name} in ${ctx.az} has free addresses` +
            (pool.allowSharedSubnets ? "" : " (allowSharedSubnets is false)"),
        );
      }
      const slots = ctx.ipv4PerEni - 1;
      const initial = !withAddresses
        ? {}
        : pool.prefixDelegation
        ? { prefixCount: prefixBatch(slots, Math.max(need, 1)) }
        : { secondaryIpCount: Math.min(ipBatch(pool, slots, need), subnet.availableIps - 1) };
      let created: EniDescription;
      ctx.reservedSubnets.push(subnet.id);
      try {
        created = await ctx.cloud.createEni({
          ...initial,
          subnetId: subnet.id,
          securityGroupIds,
          description: `vpcni ${ctx.cfg.clusterName} ${ctx.instanceId} pool ${pool.name}`,
          tags: {
            [TAG_CLUSTER]: ctx.cfg.clusterName,
            [TAG_INSTANCE]: ctx.instanceId,
            [TAG_CREATED]: new Date(ctx.now()).toISOString(),
            [TAG_POOL]: pool.name,
          },
          clientToken: crypto.randomUUID(),
        });
      } catch (e) {
        unreserve(ctx, subnet.id);
        if (cloudErrorCode(e) === "InsufficientFreeAddressesInSubnet") {
          if (withAddresses) {
            withAddresses = false; // perhaps room for the ENI, not for its batch
            continue;
          }
          markSubnetFull(ctx, subnet.id, pool.name);
          exclude.add(subnet.id);
          continue;
        }
        throw e;
      }
      subnet.availableIps = Math.max(0, subnet.availableIps - 1);
      try {
        return await attachAndFill(ctx, pool, created, subnet, deviceIndex, need);
      } finally {
        unreserve(ctx, subnet.id);
      }
    }
  } finally {
    ctx.reservedDeviceIndexes.delete(deviceIndex);
  }
}

async function attachAndFill(
  ctx: GrowthContext,
  pool: PoolConfig,
  created: EniDescription,
  subnet: SubnetInfo,
  deviceIndex: number,
  need: number,
): Promise<number> {
  ctx.creating.add(created.id);
  let attachmentId: string;
  try {
    attachmentId = await ctx.cloud.attachEni({
      eniId: created.id,
      instanceId: ctx.instanceId,
      deviceIndex,
    });
    await waitAttached(ctx, created);
  } catch (e) {
    ctx.creating.delete(created.id);
    await ctx.cloud.deleteEni(created.id).then(
      () => ctx.metrics.enisDeleted.inc({ reason: "failed_attach" }),
      () => {/* left for the leaked-ENI collector: it is tagged */},
    );
    if (cloudErrorCode(e) === "AttachmentLimitExceeded") {
      throw new PoolExhausted("eni_limit", `EC2 refused attach: ${(e as Error).message}`);
    }
    throw e;
  }
  const eni: ManagedEni = {
    id: created.id,
    mac: created.mac.toLowerCase(),
    deviceIndex,
    subnetId: subnet.id,
    subnetCidr: subnet.cidr,
    pool: pool.name,
    primary: false,
    primaryIp: created.privateIps[0] ?? "",
    attachmentId,
    // Addresses assigned by the create call are usable now that the ENI is attached.
    ips: new Set([
      ...created.privateIps.slice(1),
      ...created.prefixes.flatMap((p) => prefixAddresses(p)),
    ]),
    prefixes: [...created.prefixes],
  };
  ctx.state.enis.set(eni.id, eni);
  ctx.creating.delete(created.id);
  ctx.metrics.enisCreated.inc({ pool: pool.name });
  log.info("attached {eniId} at device index {deviceIndex} in {subnetId} for pool {pool}", {
    eniId: eni.id,
    deviceIndex,
    subnetId: subnet.id,
    pool: pool.name,
  });
  try {
    await ctx.cloud.setDeleteOnTermination({ eniId: eni.id, attachmentId });
  } catch (e) {
    log.warn("could not set delete-on-termination on {eniId}: {error}", {
      eniId: eni.id,
      error: String(e),
    });
  }
  const got = eni.ips.size;
  if (got > 0) {
    subnet.availableIps = Math.max(0, subnet.availableIps - created.privateIps.length + 1);
    ctx.metrics.ipsAssigned.inc({ pool: pool.name }, got);
    ctx.onGrew();
  }
  if (got >= Math.max(need, 1)) return got;
  return got + await assignTo(ctx, pool, eni, Math.max(need, 1) - got);
}

/**
 * Waits for an attach to complete by watching IMDS for the ENI's MAC (free: IMDS is not
 * counted against the EC2 API budget, and it lists the MAC once the device is on the node).
 * EC2 is asked only when IMDS cannot answer, and every 10 s in case IMDS lags.
 */
async function waitAttached(ctx: GrowthContext, created: EniDescription): Promise<void> {
  const mac = created.mac.toLowerCase();
  const deadline = ctx.now() + 120_000;
  let nextEc2Look = ctx.now() + 10_000;
  let delay = 100;
  while (ctx.now() < deadline) {
    const macs = await ctx.cloud.attachedMacs().catch(() => undefined);
    if (macs?.includes(mac)) return;
    if (!macs || ctx.now() >= nextEc2Look) {
      nextEc2Look = ctx.now() + 10_000;
      const [d] = await ctx.cloud.describeEnis([created.id]).catch(() => [] as EniDescription[]);
      if (d?.attachment?.status === "attached") return;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 1000);
  }
  throw new Error(`ENI ${created.id} did not reach "attached" in 120 s`);
}

/**
 * Deletes an ENI whose detach was requested, once the detach has completed. Watched on IMDS
 * (free: the MAC leaves the node when the detach completes), so a release usually costs one
 * DeleteNetworkInterface; EC2 is polled only if IMDS cannot answer or the delete is refused
 * as still in use.
 */
export async function deleteDetached(
  ctx: GrowthContext,
  eni: { id: string; mac: string },
): Promise<void> {
  const deadline = ctx.now() + 60_000;
  const mac = eni.mac.toLowerCase();
  let delay = 100;
  while (ctx.now() < deadline) {
    const macs = await ctx.cloud.attachedMacs().catch(() => undefined);
    if (!macs || !macs.includes(mac)) break;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 1000);
  }
  try {
    await ctx.cloud.deleteEni(eni.id);
    return;
  } catch (e) {
    const code = cloudErrorCode(e);
    if (code === "InvalidNetworkInterfaceID.NotFound") return;
    if (code !== "InvalidNetworkInterface.InUse") throw e;
  }
  delay = 100;
  while (ctx.now() < deadline) {
    const [d] = await ctx.cloud.describeEnis([eni.id]).catch(() => [] as EniDescription[]);
    if (!d) return;
    if (d.status === "available") {
      await ctx.cloud.deleteEni(eni.id);
      return;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 1000);
  }
  throw new Error(`ENI ${eni.id} still not "available" after detach`);
}

/** The number of addresses one ENI of this pool holds when full. */
export function perEniCapacity(pool: PoolConfig, ctx: GrowthContext): number {
  return ipsPerEni(pool, ctx.ipv4PerEni);
}
