/**
 * A start that asks EC2 nothing the node can read locally. The instance type's limits come
 * from the embedded table (or, for a type it lacks, from one DescribeInstanceTypes whose
 * answer is kept in the state directory, so a restart never asks again); the node's ENIs, their
 * subnets, addresses and prefixes come from IMDS, and which of them are this daemon's from
 * the checkpoint. A thousand nodes started together then make no Describe call at all before
 * serving pods; EC2 stays the truth at the first periodic re-sync (ipam/ec2_sync.ts).
 *
 * IMDS can lag EC2 by a few seconds after a change, so the start asks EC2 as before when
 * the last mutating call of the previous run started or ended less than that long ago (each
 * one's times are marked in the state dir, {@linkcode CHANGE_MARK_FILE}), when the checkpoint
 * names an ENI or an allocation's ENI that IMDS does not show, and (by id, one call) for ENIs
 * IMDS shows that the checkpoint does not name: only EC2's tags say whether those are ours.
 *
 * @module
 */
import { z } from "zod";
import type { CloudApi, EniDescription, InstanceLimits, NodeMetadata } from "./cloud.ts";
import type { Checkpoint } from "./checkpoint.ts";
import { embeddedLimits } from "../aws/limits.ts";
import { TAG_CLUSTER, TAG_INSTANCE, TAG_POOL } from "../base/eni_tags.ts";
import { log } from "./log.ts";

/** Limits of instance types the embedded table lacks, as EC2 gave them (in the state dir). */
export const LIMITS_CACHE_FILE = "instance-limits.json";

const limitsCacheSchema = z.record(
  z.string(),
  z.object({ maxEnis: z.number().int().min(1), ipv4PerEni: z.number().int().min(1) }),
);

async function readLimitsCache(path: string): Promise<z.infer<typeof limitsCacheSchema>> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return {};
    throw e;
  }
  try {
    return limitsCacheSchema.parse(JSON.parse(text));
  } catch (e) {
    // A cache only saves a call: a bad one is asked again and rewritten, never trusted.
    log.warn("{path} cannot be used ({error}); asking EC2 again", { path, error: String(e) });
    return {};
  }
}

/**
 * The limits of `type`: from the state dir's cache when an earlier start asked EC2 for this
 * type, else from the cloud (whose answer for a type the embedded table lacks is cached).
 */
export async function startLimits(
  cloud: Pick<CloudApi, "instanceLimits">,
  type: string,
  stateDir: string,
): Promise<InstanceLimits> {
  const path = `${stateDir}/${LIMITS_CACHE_FILE}`;
  const local = embeddedLimits(type) === undefined;
  const cache = local ? await readLimitsCache(path) : {};
  if (Object.hasOwn(cache, type)) return cache[type];
  const limits = await cloud.instanceLimits(type);
  if (local) {
    const tmp = `${path}.tmp`;
    const next = { ...cache, [type]: { maxEnis: limits.maxEnis, ipv4PerEni: limits.ipv4PerEni } };
    await Deno.writeTextFile(tmp, JSON.stringify(next, null, 2) + "\n", { mode: 0o600 });
    await Deno.rename(tmp, path);
  }
  return limits;
}

/** When this node's last mutating EC2 call started or ended (epoch ms), in the state dir. */
export const CHANGE_MARK_FILE = "ec2-change-at";

/**
 * Marks the time of a mutating call's start and end. No fsync: the mark matters only to a
 * daemon restarted within IMDS's settle time, and a process that dies leaves the page cache.
 */
export function changeMarker(stateDir: string): (at: number) => Promise<void> {
  const path = `${stateDir}/${CHANGE_MARK_FILE}`;
  return (at) => Deno.writeTextFile(path, `${Math.round(at)}\n`, { mode: 0o600 });
}

async function lastChangeAt(stateDir: string): Promise<number | undefined> {
  try {
    const at = Number((await Deno.readTextFile(`${stateDir}/${CHANGE_MARK_FILE}`)).trim());
    // Unreadable: as if the change were now, so EC2 is asked.
    return Number.isFinite(at) ? at : Infinity;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    return Infinity;
  }
}

/** Inputs of {@linkcode attachedEnisFromImds}. */
export interface ImdsStartInput {
  cloud: Pick<CloudApi, "describeEnis">;
  clusterName: string;
  /** Where the change mark of the previous run is. */
  stateDir: string;
  node: NodeMetadata;
  /** The checkpoint of this instance (already repaired), if any. */
  checkpoint: Checkpoint | undefined;
  now: number;
  /** How long IMDS may lag a mutating call. */
  imdsSettleMs: number;
}

/**
 * The node's attached ENIs as EC2 would describe them, built from IMDS and the checkpoint
 * (ENIs the checkpoint does not name are described by id), or `undefined` when IMDS cannot be
 * trusted yet and the start must describe the instance's ENIs in EC2.
 */
export async function attachedEnisFromImds(
  o: ImdsStartInput,
): Promise<EniDescription[] | undefined> {
  const { node, checkpoint } = o;
  const changed = await lastChangeAt(o.stateDir);
  if (changed !== undefined && o.now - changed < o.imdsSettleMs) return undefined;
  const shown = new Map(node.enis.map((e) => [e.eniId, e]));
  const recorded = new Map((checkpoint?.enis ?? []).map((e) => [e.id, e]));
  const missing = [
    ...recorded.keys(),
    ...(checkpoint?.allocations ?? []).map((a) => a.eniId),
  ].filter((id) => !shown.has(id));
  if (missing.length) {
    log.info("IMDS does not show {missing} yet; describing the node's ENIs in EC2", {
      missing: [...new Set(missing)].join(", "),
    });
    return undefined;
  }
  const out: EniDescription[] = [];
  const unknown: string[] = [];
  for (const e of node.enis) {
    const mine = recorded.get(e.eniId);
    if (e.deviceIndex !== 0 && !mine) {
      unknown.push(e.eniId);
      continue;
    }
    out.push({
      id: e.eniId,
      subnetId: e.subnetId,
      mac: e.mac,
      status: "in-use",
      attachment: {
        id: mine?.attachmentId ?? "",
        instanceId: node.instanceId,
        deviceIndex: e.deviceIndex,
        status: "attached",
      },
      privateIps: [...e.localIpv4s],
      prefixes: [...e.ipv4Prefixes],
      tags: mine
        ? { [TAG_CLUSTER]: o.clusterName, [TAG_INSTANCE]: node.instanceId, [TAG_POOL]: mine.pool }
        : {},
      securityGroupIds: [...e.securityGroupIds],
    });
  }
  // Only EC2's tags tell whether an ENI the checkpoint does not name is ours.
  if (unknown.length) out.push(...await o.cloud.describeEnis(unknown));
  return out;
}
