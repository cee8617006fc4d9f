/**
 * Start-up reconciliation of three sources into one node state:
 * - EC2 (and IMDS for the primary ENI): the truth for which ENIs are attached and which
 *   addresses they hold;
 * - the checkpoint: which pod holds which address, and cooldowns;
 * - the kernel: whether each pod's network namespace still exists, and which addresses the
 *   host still routes to pods (ipam/kernel_view.ts).
 *
 * Allocations whose address EC2 no longer assigns are dropped; allocations whose pod netns
 * is gone are orphans, released into cooldown; assigned addresses nobody holds are free.
 * The checkpoint is read (`loadCheckpoint`) and repaired (ipam/checkpoint.ts) first.
 *
 * @module
 */
import type { CloudApi, EniDescription, NodeMetadata } from "./cloud.ts";
import {
  type Checkpoint,
  hasDuplicateAttachments,
  readCheckpoint,
  repairCheckpoint,
} from "./checkpoint.ts";
import { type DaemonConfig, MAX_COOLDOWN_SECONDS, type SubnetChoice } from "./config.ts";
import { defaultPoolName, subnetChoice } from "./config.ts";
import { attachmentKey, type ManagedEni, NodeState } from "./node_state.ts";
import { TAG_CLUSTER, TAG_INSTANCE, TAG_POOL } from "../base/eni_tags.ts";
import { matchSubnets, podAddresses } from "./subnets.ts";
import type { SubnetInfo } from "./cloud.ts";
import { log } from "./log.ts";
import type { KernelView } from "./kernel_view.ts";

/** Summary of what reconciliation did, for the log and for tests. */
export interface ReconcileReport {
  enis: number;
  kept: number;
  droppedUnassigned: number;
  orphansReleased: number;
  cooldownsKept: number;
  /** Addresses no allocation names that the host still routes to a pod: held, not free. */
  routedUnknown: number;
  foreignDeviceIndexes: number[];
}

/** The checkpoint of this instance, repaired; undefined when there is none (or another's). */
export async function loadCheckpoint(
  cfg: DaemonConfig,
  node: NodeMetadata,
  kernel: KernelView,
  now: number,
): Promise<Checkpoint | undefined> {
  const checkpoint = await readCheckpoint(cfg.stateDir);
  if (checkpoint && checkpoint.instanceId !== node.instanceId) {
    log.warn("checkpoint belongs to {other}, this is {instanceId}; starting empty", {
      other: checkpoint.instanceId,
      instanceId: node.instanceId,
    });
    return undefined;
  }
  return checkpoint && await repaired(cfg, checkpoint, kernel, now);
}

/** The checkpoint made safe to reconcile (ipam/checkpoint.ts), each repair logged. */
async function repaired(
  cfg: DaemonConfig,
  cp: Checkpoint,
  kernel: KernelView,
  now: number,
): Promise<Checkpoint> {
  const routed = hasDuplicateAttachments(cp) ? await kernel.routedPodIps() : undefined;
  const { checkpoint, warnings } = repairCheckpoint(cp, {
    now,
    maxCooldownMs: MAX_COOLDOWN_SECONDS * 1000,
    cooldownMs: (pool) => (cfg.pools.find((p) => p.name === pool)?.ipCooldownSeconds ?? 30) * 1000,
    routed,
  });
  for (const w of warnings) log.warn("{warning}", { warning: w, stateDir: cfg.stateDir });
  return checkpoint;
}

/** Builds the node state from EC2, the checkpoint and the kernel. */
export async function reconcile(o: {
  cfg: DaemonConfig;
  cloud: CloudApi;
  node: NodeMetadata;
  subnets: SubnetInfo[];
  checkpoint: Checkpoint | undefined;
  kernel: KernelView;
  now: number;
  /** The attached ENIs when the caller built them already (ipam/imds_start.ts). */
  described?: EniDescription[];
}): Promise<{ state: NodeState; report: ReconcileReport }> {
  const { cfg, cloud, node } = o;
  const state = new NodeState(node.instanceId);
  const primary = node.enis.find((e) => e.deviceIndex === 0);
  if (!primary) throw new Error("IMDS lists no ENI at device index 0");

  // EC2 is the truth for addresses. One call finds every ENI attached (or attaching) here,
  // also those IMDS does not show yet; an ENI only IMDS shows is described by id. Our
  // detached ENIs are the leaked-ENI collector's business, after its grace.
  const described = o.described ?? await cloud.describeAttachedEnis(node.instanceId);
  const byId = new Map(described.map((d) => [d.id, d]));
  const unseen = o.described ? [] : node.enis.map((e) => e.eniId).filter((id) => !byId.has(id));
  if (unseen.length) { for (const d of await cloud.describeEnis(unseen)) byId.set(d.id, d); }

  const poolOfPrimary = primaryPool(cfg, o.subnets, node, primary.subnetId);
  const foreign: number[] = [];
  for (const d of byId.values()) {
    const att = d.attachment;
    if (!att || att.instanceId !== node.instanceId) continue;
    if (att.status !== "attached" && att.status !== "attaching") continue;
    const isPrimary = att.deviceIndex === 0;
    const ours = d.tags[TAG_CLUSTER] === cfg.clusterName &&
      d.tags[TAG_INSTANCE] === node.instanceId;
    let pool: string | undefined;
    if (isPrimary) pool = poolOfPrimary;
    else if (ours) {
      pool = d.tags[TAG_POOL];
      if (!pool || !cfg.pools.some((p) => p.name === pool)) {
        log.warn("ENI {eniId} belongs to unknown pool {pool}; adopting it into the default pool", {
          eniId: d.id,
          pool,
        });
        pool = defaultPoolName(cfg);
      }
    }
    if (pool === undefined) {
      foreign.push(att.deviceIndex);
      continue;
    }
    state.enis.set(d.id, managedEni(d, pool, isPrimary, o.subnets));
  }

  let kept = 0, droppedUnassigned = 0, orphansReleased = 0, cooldownsKept = 0;
  const poolCooldown = new Map(cfg.pools.map((p) => [p.name, p.ipCooldownSeconds * 1000]));
  for (const a of o.checkpoint?.allocations ?? []) {
    const owner = state.ownerOf(a.ip);
    if (!owner || state.holder.has(a.ip)) {
      droppedUnassigned++;
      log.warn("checkpoint allocation {ip} of {containerId} is no longer assigned; dropped", {
        ip: a.ip,
        containerId: a.containerId,
      });
      continue;
    }
    const rec = { ...a, eniId: owner.id, pool: owner.pool };
    const key = attachmentKey(rec);
    state.allocations.set(key, rec);
    state.holder.set(rec.ip, key);
    if (await o.kernel.podAlive(a) === false) {
      state.release(key, o.now, poolCooldown.get(owner.pool) ?? 30_000);
      orphansReleased++;
      log.info("pod {podNamespace}/{podName} ({containerId}) is gone; {ip} released", {
        ...a,
      });
    } else kept++;
  }
  for (const c of o.checkpoint?.cooldowns ?? []) {
    const owner = state.ownerOf(c.ip);
    if (owner && c.until > o.now && !state.holder.has(c.ip)) {
      state.cooldowns.set(c.ip, { ...c, eniId: owner.id });
      cooldownsKept++;
    }
  }
  // A lost checkpoint must not turn running pods' addresses into free ones.
  // When the rules cannot be read, what the last run held stays held.
  const routed = await o.kernel.routedPodIps() ?? new Set(o.checkpoint?.routedUnknown ?? []);
  for (const ip of routed) {
    if (state.ownerOf(ip) && !state.holder.has(ip)) {
      state.routedUnknown.add(ip);
      state.cooldowns.delete(ip);
    }
  }
  if (state.routedUnknown.size) {
    log.warn(
      "{count} addresses are routed to pods no allocation names (checkpoint lost?); held until those pods are deleted",
      { count: state.routedUnknown.size, ips: [...state.routedUnknown] },
    );
  }
  const report: ReconcileReport = {
    enis: state.enis.size,
    kept,
    droppedUnassigned,
    orphansReleased,
    cooldownsKept,
    routedUnknown: state.routedUnknown.size,
    foreignDeviceIndexes: foreign,
  };
  log.info("reconciled: {enis} ENIs, {kept} allocations kept, {orphansReleased} orphans", {
    ...report,
  });
  return { state, report };
}

function managedEni(
  d: EniDescription,
  pool: string,
  primary: boolean,
  subnets: SubnetInfo[],
): ManagedEni {
  const ips = podAddresses(d.privateIps.slice(1), d.prefixes);
  return {
    id: d.id,
    mac: d.mac.toLowerCase(),
    deviceIndex: d.attachment?.deviceIndex ?? 0,
    subnetId: d.subnetId,
    subnetCidr: subnets.find((s) => s.id === d.subnetId)?.cidr ?? "",
    pool,
    primary,
    primaryIp: d.privateIps[0] ?? "",
    attachmentId: d.attachment?.id || undefined,
    ips,
    prefixes: [...d.prefixes],
  };
}

/** The pool that uses the primary ENI: the first with firstInterfaceIndex 0 matching its subnet. */
function primaryPool(
  cfg: DaemonConfig,
  subnets: SubnetInfo[],
  node: NodeMetadata,
  primarySubnetId: string,
): string | undefined {
  const ordered = [
    ...cfg.pools.filter((p) => p.name === defaultPoolName(cfg)),
    ...cfg.pools.filter((p) => p.name !== defaultPoolName(cfg)),
  ];
  for (const p of ordered) {
    if (p.firstInterfaceIndex > 0) continue;
    const choice: SubnetChoice = subnetChoice(p);
    const ids = matchSubnets(choice, subnets, { az: node.az, primarySubnetId }).map((s) => s.id);
    if (ids.includes(primarySubnetId)) return p.name;
  }
  return undefined;
}
