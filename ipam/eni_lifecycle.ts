/**
 * The life of an ENI the daemon creates for a pool: pick a subnet and a device index, create
 * the ENI (with its first addresses when the subnet has room), attach it, wait until it is on
 * the node and fill it; and, when the pool gives it back, delete it once the detach is done.
 *
 * @module
 */
import { cloudErrorCode, type EniDescription, type SubnetInfo } from "./cloud.ts";
import type { PoolConfig, SubnetChoice } from "./config.ts";
import {
  assignToEni,
  candidateSubnets,
  type GrowthContext,
  ipBatch,
  markSubnetFull,
  PoolExhausted,
  prefixBatch,
} from "./growth.ts";
import { TAG_CLUSTER, TAG_CREATED, TAG_INSTANCE, TAG_POOL } from "../base/eni_tags.ts";
import type { ManagedEni } from "./node_state.ts";
import { pickSubnet, podAddresses } from "./subnets.ts";
import { log } from "./log.ts";
import { THROTTLE_CODES } from "../aws/retry.ts";

/** Takes an ENI created earlier for `pool` whose attach was throttled (`ctx.spareEnis`). */
function takeSpare(ctx: GrowthContext, pool: string) {
  const i = ctx.spareEnis.findIndex((s) => s.pool === pool);
  return i < 0 ? undefined : ctx.spareEnis.splice(i, 1)[0];
}

/** Drops one in-flight creation's hold on a subnet (see `GrowthContext.reservedSubnets`). */
function unreserve(ctx: GrowthContext, subnetId: string) {
  const i = ctx.reservedSubnets.indexOf(subnetId);
  if (i >= 0) ctx.reservedSubnets.splice(i, 1);
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
    const spare = takeSpare(ctx, pool.name);
    if (spare) {
      log.info("attaching {eniId}, created earlier for pool {pool}, instead of a new ENI", {
        eniId: spare.created.id,
        pool: pool.name,
      });
      return await attachAndFill(ctx, pool, spare.created, spare.subnet, deviceIndex, need);
    }
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
    if (THROTTLE_CODES.has(cloudErrorCode(e) ?? "")) {
      ctx.spareEnis.push({ created, pool: pool.name, subnet });
      throw e;
    }
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
    ips: podAddresses(created.privateIps.slice(1), created.prefixes),
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
  return got + await assignToEni(ctx, pool, eni, Math.max(need, 1) - got);
}

/**
 * Waits for an attach to complete by watching IMDS for the ENI's MAC (free: IMDS is not
 * counted against the EC2 API budget, and it lists the MAC once the device is on the node).
 * EC2 is asked only when IMDS cannot answer, and every 10 s in case IMDS lags.
 */
async function waitAttached(ctx: GrowthContext, created: EniDescription): Promise<void> {
  const mac = created.mac.toLowerCase();
  const k = ctx.timeScale ?? 1;
  const deadline = ctx.now() + 120_000 * k;
  let nextEc2Look = ctx.now() + 10_000 * k;
  let delay = 100 * k;
  while (ctx.now() < deadline) {
    const macs = await ctx.cloud.attachedMacs().catch(() => undefined);
    if (macs?.includes(mac)) return;
    if (!macs || ctx.now() >= nextEc2Look) {
      nextEc2Look = ctx.now() + 10_000 * k;
      const [d] = await ctx.cloud.describeEnis([created.id]).catch(() => [] as EniDescription[]);
      if (d?.attachment?.status === "attached") return;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 1000 * k);
  }
  throw new Error(`ENI ${created.id} did not reach "attached" in 120 s`);
}

/**
 * Deletes an ENI whose detach was requested, once the detach has completed. Watched on IMDS
 * (free: the MAC leaves the node when the detach completes), so a release usually costs one
 * DeleteNetworkInterface; EC2 is polled only if IMDS cannot answer or the delete is refused
 * as still in use. Resolves once EC2 deleted the ENI or says it does not exist
 * (`InvalidNetworkInterfaceID.NotFound`, or absent from a describe); a describe that fails
 * proves nothing and is asked again. Throws when the ENI is still there after 60 s.
 */
export async function deleteDetached(
  ctx: Pick<GrowthContext, "cloud" | "now" | "timeScale">,
  eni: { id: string; mac: string },
): Promise<void> {
  const k = ctx.timeScale ?? 1;
  const deadline = ctx.now() + 60_000 * k;
  const mac = eni.mac.toLowerCase();
  let delay = 100 * k;
  while (ctx.now() < deadline) {
    const macs = await ctx.cloud.attachedMacs().catch(() => undefined);
    if (!macs || !macs.includes(mac)) break;
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 1000 * k);
  }
  try {
    await ctx.cloud.deleteEni(eni.id);
    return;
  } catch (e) {
    const code = cloudErrorCode(e);
    if (code === "InvalidNetworkInterfaceID.NotFound") return;
    if (code !== "InvalidNetworkInterface.InUse") throw e;
  }
  delay = 100 * k;
  let lastError: unknown;
  while (ctx.now() < deadline) {
    let d: EniDescription | undefined;
    try {
      // describeEnis answers NotFound as an empty list (ipam/aws_cloud.ts): only that is gone.
      [d] = await ctx.cloud.describeEnis([eni.id]);
      if (!d) return;
      if (d.status === "available") {
        await ctx.cloud.deleteEni(eni.id);
        return;
      }
    } catch (e) {
      if (cloudErrorCode(e) === "InvalidNetworkInterfaceID.NotFound") return;
      if (lastError === undefined) {
        log.warn("cannot tell whether detached ENI {eniId} is gone yet, asking again: {error}", {
          eniId: eni.id,
          error: String(e),
        });
      }
      lastError = e;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 1000 * k);
  }
  throw new Error(
    `ENI ${eni.id} still not "available" after detach` +
      (lastError === undefined ? "" : ` (last EC2 error: ${(lastError as Error).message})`),
  );
}
