/**
 * Releases the reservations of pods that are gone without the daemon hearing their DEL, so
 * that no address outlives its pod by more than one loop step once the daemon runs:
 *
 * - **DELs the daemon did not see** (proto/del_records.ts): the plugin's DEL while the daemon
 *   was down wrote a record; the reservation it names is released, unless an ADD of the same
 *   attachment took its address after that DEL. Read before the daemon serves its first
 *   request, and on every loop step.
 * - **The sweep**, the backstop when no record could be written (or the runtime never sent a
 *   DEL): a reservation whose pod netns is gone and whose address no longer has the
 *   datapath's per-pod host rule is released. Both must hold: a netns can be gone while its
 *   DEL is still to come (the rule is then still there, and the DEL removes it), and the rule
 *   is gone during every pod's ADD (the netns is then there). Reservations younger than
 *   {@linkcode SWEEP_GRACE_MS} and those of an ADD in flight are never swept; a netns is
 *   "gone" only after this daemon saw it there, so a path outside the daemon's mount
 *   namespace never frees a live pod's address.
 *
 * @module
 */
import { readDelRecords } from "../proto/del_records.ts";
import type { KernelView } from "./kernel_view.ts";
import type { PoolManager } from "./pools.ts";
import { attachmentKey } from "./node_state.ts";
import { log } from "./log.ts";

/** A reservation this young is never swept: its ADD may still be wiring the pod. */
export const SWEEP_GRACE_MS = 30_000;

/** Why a reservation went without its DEL reaching the daemon (the metric's label). */
export type GoneReason = "del-while-down" | "pod-gone";

/** What the releaser works with. */
export interface GonePodsParts {
  pools: PoolManager;
  kernel: KernelView;
  /** The daemon's socket: the records are in the directory beside it. */
  socketPath: string;
  now: () => number;
  /** Counts one released reservation. */
  count: (reason: GoneReason, pool: string) => void;
}

/**
 * Releases what the DEL records name and removes the records; returns how many
 * reservations went. A record that cannot be read is moved out of the way (renamed with a
 * `.bad` suffix, so it is neither read again nor lost to an SRE). A failed checkpoint write
 * keeps the records for the next pass (the releases hold in memory).
 */
export async function releaseRecordedDels(p: GonePodsParts): Promise<number> {
  const files = await readDelRecords(p.socketPath);
  if (files.length === 0) return 0;
  const { allocator } = p.pools;
  const released: string[] = [];
  for (const f of files) {
    if (!f.record) {
      log.warn("DEL record {path} is unreadable ({problem}); set aside as {path}.bad", {
        path: f.path,
        problem: f.problem,
      });
      await Deno.rename(f.path, `${f.path}.bad`).catch(() => {});
      continue;
    }
    const key = attachmentKey(f.record);
    const a = allocator.allocation(key);
    // An ADD after the DEL made a new reservation of the same attachment: it stays.
    if (!a || a.time > f.record.time || p.pools.busy(key)) continue;
    allocator.release(key);
    p.count("del-while-down", a.pool);
    released.push(a.ip);
    log.info(
      "released {ip} of {containerId}: its DEL ran while the daemon was down ({record})",
      { ip: a.ip, containerId: a.containerId, ifName: a.ifName, record: f.path },
    );
  }
  if (released.length) {
    await allocator.saveReleases(`DEL records released ${released.join(", ")}`);
  }
  for (const f of files) if (f.record) await Deno.remove(f.path).catch(() => {});
  return released.length;
}

/**
 * The sweep (see the module doc); returns how many reservations went. `seen` holds the
 * attachments whose netns this daemon has seen alive: only those can be found gone, so a
 * netns path the daemon never could see (mounted where its mount namespace does not reach,
 * or given to another main plugin) never frees a live pod's address.
 */
export async function sweepGonePods(p: GonePodsParts, seen: Set<string>): Promise<number> {
  const { allocator } = p.pools;
  const old = p.now() - SWEEP_GRACE_MS;
  const gone: string[] = [];
  for (const key of seen) if (!allocator.allocation(key)) seen.delete(key);
  for (const [key, a] of allocator.allocations()) {
    if (p.pools.busy(key)) continue;
    const alive = await p.kernel.podAlive(a);
    if (alive === true) seen.add(key);
    else if (alive === false && seen.has(key) && a.time <= old) gone.push(key);
  }
  if (gone.length === 0) return 0;
  const ruled = await p.kernel.ruledPodIps();
  if (!ruled) return 0; // the rules cannot be read: nothing is known to be gone
  const released: string[] = [];
  for (const key of gone) {
    const a = allocator.allocation(key);
    if (!a || ruled.has(a.ip) || p.pools.busy(key)) continue;
    allocator.release(key);
    seen.delete(key);
    p.count("pod-gone", a.pool);
    released.push(a.ip);
    log.info("released {ip} of {containerId}: its pod netns {netns} and host rule are gone", {
      ip: a.ip,
      containerId: a.containerId,
      ifName: a.ifName,
      netns: a.netns,
    });
  }
  if (released.length) await allocator.saveReleases(`the sweep released ${released.join(", ")}`);
  return released.length;
}

/** What the daemon runs: the records alone at start, records and sweep on each loop step. */
export interface GoneReleaser {
  releaseRecorded(): Promise<number>;
  releaseAll(): Promise<void>;
}

/** The releaser of a daemon (none in a headless core, which has no plugin and no pods). */
export function goneReleaser(p: GonePodsParts): GoneReleaser {
  const seen = new Set<string>();
  return {
    releaseRecorded: () => releaseRecordedDels(p),
    async releaseAll() {
      await releaseRecordedDels(p);
      await sweepGonePods(p, seen);
    },
  };
}
