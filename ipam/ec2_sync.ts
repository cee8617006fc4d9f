/**
 * Keeping the node state true to EC2 after start: a periodic re-sync (EC2 is the truth for
 * what is assigned; a request sent by a daemon that was killed can still land after the next
 * one reconciled) and the leaked-ENI collector.
 *
 * @module
 */
import type { CloudApi, EniDescription } from "./cloud.ts";
import type { GrowthContext } from "./growth.ts";
import { TAG_CLUSTER, TAG_CREATED, TAG_INSTANCE, TAG_POOL } from "../base/eni_tags.ts";
import { defaultPoolName } from "./config.ts";
import { podAddresses } from "./subnets.ts";
import { log } from "./log.ts";

const MUTATING = new Set<keyof CloudApi>([
  "createEni",
  "attachEni",
  "detachEni",
  "deleteEni",
  "assignIps",
  "assignPrefixes",
  "unassignIps",
  "unassignPrefixes",
]);

/** A cloud that counts mutating calls, so a re-sync can tell its snapshot raced one. */
export interface TrackedCloud extends CloudApi {
  /** Bumped when a mutating call starts and when it ends. */
  readonly mutationEpoch: () => number;
  readonly mutationsInFlight: () => number;
  /** When the last mutating call ended (epoch ms by `now`; 0 before any). */
  readonly lastMutationAt: () => number;
  /**
   * The node's tagged ENIs as the last re-sync that no mutation overlapped saw them (at and
   * epoch by this cloud's clock and count): the leaked-ENI collector reuses a fresh one.
   */
  lastTagged?: { at: number; epoch: number; enis: EniDescription[] };
}

/**
 * Wraps a cloud to count its mutating calls, timing them by `now`; `mark`, when given, is
 * told each one's start and end time (ipam/imds_start.ts keeps them for the next start).
 */
export function trackMutations(
  cloud: CloudApi,
  now: () => number = Date.now,
  mark?: (at: number) => Promise<void>,
): TrackedCloud {
  let epoch = 0;
  let inFlight = 0;
  let lastEnded = 0;
  const wrapped: Record<string, unknown> = {};
  for (const key of Object.keys(cloud) as (keyof CloudApi)[]) {
    const fn = cloud[key];
    if (typeof fn !== "function") continue;
    wrapped[key] = MUTATING.has(key)
      ? async (...args: unknown[]) => {
        epoch++;
        inFlight++;
        try {
          await mark?.(now()).catch(() => {}); // a missing mark only costs the next start a call
          return await (fn as (...a: unknown[]) => Promise<unknown>).apply(cloud, args);
        } finally {
          // Marked while still counted in flight: a caller's continuation runs right after
          // the count drops, so no re-sync sees the state between the call and its handling.
          await mark?.(now()).catch(() => {});
          inFlight--;
          epoch++;
          lastEnded = now();
        }
      }
      : (fn as (...a: unknown[]) => unknown).bind(cloud);
  }
  return {
    ...(wrapped as unknown as CloudApi),
    mutationEpoch: () => epoch,
    mutationsInFlight: () => inFlight,
    lastMutationAt: () => lastEnded,
  };
}

function ipsOf(d: EniDescription): Set<string> {
  return podAddresses(d.privateIps.slice(1), d.prefixes);
}

/**
 * Makes the node state match EC2: addresses EC2 assigned that the state lacks are adopted
 * as free; addresses EC2 no longer has are dropped unless a pod holds them (logged as an
 * error: the pod's address is gone). Our tagged ENIs attached here but unknown are adopted.
 * Skipped (returns false) when a mutating EC2 call overlapped the snapshot.
 */
export async function resyncWithEc2(ctx: GrowthContext, cloud: TrackedCloud): Promise<boolean> {
  if (cloud.mutationsInFlight() > 0) return false;
  const epoch = cloud.mutationEpoch();
  const tagged = await cloud.describeTaggedEnis({
    [TAG_CLUSTER]: ctx.cfg.clusterName,
    [TAG_INSTANCE]: ctx.instanceId,
  });
  // Our ENIs come with the tag query; only the ENIs we manage without our tags (the primary)
  // need a second call.
  const untagged = [...ctx.state.enis.keys()].filter((id) => !tagged.some((d) => d.id === id));
  const known = untagged.length ? await cloud.describeEnis(untagged) : [];
  if (cloud.mutationEpoch() !== epoch || cloud.mutationsInFlight() > 0) return false;
  cloud.lastTagged = { at: ctx.now(), epoch, enis: tagged };
  const now = ctx.now();
  const byId = new Map([...tagged, ...known].map((d) => [d.id, d]));
  let changed = false;
  for (const eni of ctx.state.enis.values()) {
    const d = byId.get(eni.id);
    if (!d || d.attachment?.instanceId !== ctx.instanceId) {
      if ([...eni.ips].some((ip) => ctx.state.holder.has(ip))) {
        log.error("ENI {eniId} is no longer attached but pods hold its addresses", {
          eniId: eni.id,
        });
        continue;
      }
      ctx.state.enis.delete(eni.id);
      changed = true;
      continue;
    }
    if (!eni.primaryIp && d.privateIps[0]) eni.primaryIp = d.privateIps[0];
    const truth = ipsOf(d);
    for (const ip of truth) {
      if (!eni.ips.has(ip)) {
        eni.ips.add(ip);
        changed = true;
        log.info("adopted {ip} on {eniId}: assigned in EC2, unknown here", { ip, eniId: eni.id });
      }
    }
    for (const ip of [...eni.ips]) {
      if (truth.has(ip)) continue;
      if (ctx.state.holder.has(ip)) {
        log.error("{ip} on {eniId} is held by a pod but no longer assigned in EC2", {
          ip,
          eniId: eni.id,
        });
        continue;
      }
      eni.ips.delete(ip);
      ctx.state.cooldowns.delete(ip);
      changed = true;
    }
    eni.prefixes = [...d.prefixes];
  }
  for (const d of tagged) {
    const att = d.attachment;
    if (ctx.state.enis.has(d.id) || !att || att.instanceId !== ctx.instanceId) continue;
    if (att.status !== "attached" || ctx.creating.has(d.id)) continue;
    let pool = d.tags[TAG_POOL];
    if (!pool || !ctx.cfg.pools.some((p) => p.name === pool)) pool = defaultPoolName(ctx.cfg);
    ctx.state.enis.set(d.id, {
      id: d.id,
      mac: d.mac.toLowerCase(),
      deviceIndex: att.deviceIndex,
      subnetId: d.subnetId,
      subnetCidr: ctx.subnets.find((s) => s.id === d.subnetId)?.cidr ?? "",
      pool,
      primary: att.deviceIndex === 0,
      primaryIp: d.privateIps[0] ?? "",
      attachmentId: att.id,
      ips: ipsOf(d),
      prefixes: [...d.prefixes],
    });
    changed = true;
    log.info("adopted ENI {eniId} (ours, attached here, unknown)", { eniId: d.id });
  }
  if (changed) ctx.onGrew();
  void now;
  return true;
}

/** Deletes our ENIs (this cluster AND this instance) left "available" past the grace. */
export class LeakedEniCollector {
  #firstSeen = new Map<string, number>();

  readonly #startedAt: number;

  /**
   * Binds the collector to the growth context and the mutation-counting cloud. ENIs created
   * before it started cannot be creations of this daemon in flight: their grace counts from
   * its start, so the first pass after `leakedEniGraceSeconds` can delete them.
   */
  constructor(readonly ctx: GrowthContext, readonly cloud: TrackedCloud) {
    this.#startedAt = ctx.now();
  }

  /**
   * One pass; returns the ids it deleted. A pass whose snapshot overlapped a mutating call
   * is dropped: an ENI created a moment ago is "available" until its attach lands.
   */
  async collect(): Promise<string[]> {
    const ctx = this.ctx;
    const now = ctx.now();
    const graceMs = ctx.cfg.leakedEniGraceSeconds * 1000;
    if (this.cloud.mutationsInFlight() > 0) return [];
    const epoch = this.cloud.mutationEpoch();
    // Reuse the re-sync's snapshot when it is fresh and nothing changed since.
    const lastTagged = this.cloud.lastTagged;
    const ours = lastTagged && now - lastTagged.at < 1000 && lastTagged.epoch === epoch
      ? lastTagged.enis
      : await this.cloud.describeTaggedEnis({
        [TAG_CLUSTER]: ctx.cfg.clusterName,
        [TAG_INSTANCE]: ctx.instanceId,
      });
    if (this.cloud.mutationEpoch() !== epoch || this.cloud.mutationsInFlight() > 0) return [];
    const deleted: string[] = [];
    const seenNow = new Map<string, number>();
    for (const e of ours) {
      // The filter asked for both tags; check them again before deleting anything.
      if (e.tags[TAG_CLUSTER] !== ctx.cfg.clusterName) continue;
      if (e.tags[TAG_INSTANCE] !== ctx.instanceId) continue;
      if (e.status !== "available" || e.attachment) continue;
      if (ctx.creating.has(e.id) || ctx.state.enis.has(e.id)) continue;
      const created = Date.parse(e.tags[TAG_CREATED] ?? "") || 0;
      const firstSeen = this.#firstSeen.get(e.id) ??
        (created && created < this.#startedAt ? this.#startedAt : now);
      seenNow.set(e.id, firstSeen);
      if (now - firstSeen < graceMs || now - created < graceMs) continue;
      try {
        await ctx.cloud.deleteEni(e.id);
        deleted.push(e.id);
        seenNow.delete(e.id);
        ctx.metrics.enisDeleted.inc({ reason: "leaked" });
        log.info("deleted leaked ENI {eniId}", { eniId: e.id });
      } catch (err) {
        log.warn("could not delete leaked ENI {eniId}: {error}", {
          eniId: e.id,
          error: String(err),
        });
      }
    }
    this.#firstSeen = seenNow;
    return deleted;
  }
}
