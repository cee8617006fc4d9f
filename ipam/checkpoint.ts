/**
 * The daemon's checkpoint: allocations and cooldowns, a versioned JSON document written
 * atomically (temp file, fsync, rename, fsync of the directory) on every change. Writes
 * are coalesced: callers that change state while a write is running share the next one,
 * and each caller's promise settles only once a write that includes its change is durable.
 *
 * @module
 */
import { z } from "zod";
import { writeFileAtomic } from "../base/fsync.ts";

/** Current checkpoint schema version. */
export const CHECKPOINT_VERSION = 1;

/** The checkpoint's file name inside the state directory. */
export const CHECKPOINT_FILE = "ipam-checkpoint.json";

const allocationSchema = z.object({
  network: z.string(),
  containerId: z.string(),
  ifName: z.string(),
  podNamespace: z.string().optional(),
  podName: z.string().optional(),
  podUid: z.string().optional(),
  netns: z.string().optional(),
  /**
   * The daemon's mount namespace did not reach `netns` at the ADD (the plugin handed the netns
   * over): its liveness cannot be read from the path (ipam/kernel_view.ts). Absent: it did.
   */
  netnsHidden: z.boolean().optional(),
  ip: z.string(),
  eniId: z.string(),
  pool: z.string(),
  /** Epoch milliseconds of the ADD. */
  time: z.number(),
});

const cooldownSchema = z.object({
  ip: z.string(),
  eniId: z.string(),
  /** Epoch milliseconds (wall clock, so it survives restarts). */
  until: z.number(),
});

/** The checkpoint document. */
export const checkpointSchema = z.object({
  version: z.literal(CHECKPOINT_VERSION),
  instanceId: z.string(),
  savedAt: z.number(),
  allocations: z.array(allocationSchema),
  cooldowns: z.array(cooldownSchema),
  /**
   * Addresses the host still routed to pods no allocation named when this was written (after
   * a lost checkpoint): held, so a reader without the kernel (doctor with the daemon down)
   * knows them too. Absent in checkpoints written before it existed.
   */
  routedUnknown: z.array(z.string()).optional(),
  /**
   * The node's own ENIs beyond the primary when this was written: which pool each serves and
   * its attachment, so a restart can take the ENIs IMDS shows as ours without asking EC2 for
   * their tags (ipam/imds_start.ts). Absent in checkpoints written before it existed.
   */
  enis: z.array(z.object({
    id: z.string(),
    pool: z.string(),
    deviceIndex: z.number(),
    attachmentId: z.string().optional(),
  })).optional(),
});

/** One pod's recorded allocation. */
export type AllocationRecord = z.infer<typeof allocationSchema>;
/** One address in cooldown. */
export type CooldownRecord = z.infer<typeof cooldownSchema>;
/** The whole checkpoint. */
export type Checkpoint = z.infer<typeof checkpointSchema>;

/**
 * A checkpoint that cannot be read. The daemon refuses to start rather than guess which pod
 * holds which address; the message names the file, the fault and the way out.
 */
export class CorruptCheckpointError extends Error {
  /** The checkpoint's path. */
  readonly path: string;
  /** Builds the message from the path and what is wrong with the file. */
  constructor(path: string, fault: string) {
    super(
      `checkpoint ${path} cannot be used: ${fault}. The daemon will not guess which pod holds ` +
        `which address, so it does not start. Way out: drain the node (kubectl drain), move ` +
        `the file aside (mv ${path} ${path}.bad) and restart; with no checkpoint the daemon ` +
        `rebuilds its pools from EC2 and holds the addresses the host still routes to pods ` +
        `until those pods are deleted (pods of a main plugin other than vpcni are not seen).`,
    );
    this.name = "CorruptCheckpointError";
    this.path = path;
  }
}

/**
 * A checkpoint of a schema version newer than this release reads: a newer release wrote it
 * and the node was downgraded. The daemon refuses to start rather than drop what that release
 * recorded; the message names the file, both versions and the two ways out.
 */
export class NewerCheckpointError extends Error {
  /** The checkpoint's path. */
  readonly path: string;
  /** The version the file holds. */
  readonly found: number;
  /** Builds the message from the path and the version the file holds. */
  constructor(path: string, found: number) {
    super(
      `checkpoint ${path} has schema version ${found}; this release reads version ` +
        `${CHECKPOINT_VERSION} only: a newer vpcni release wrote it. The daemon will not drop ` +
        `what that release recorded, so it does not start. Way out: run the release that wrote ` +
        `it (or a newer one); or, to stay on this release, drain the node (kubectl drain), move ` +
        `the file aside (mv ${path} ${path}.v${found}) and restart; with no checkpoint the ` +
        `daemon rebuilds its pools from EC2 and holds the addresses the host still routes to ` +
        `pods until those pods are deleted (pods of a main plugin other than vpcni are not seen).`,
    );
    this.name = "NewerCheckpointError";
    this.path = path;
    this.found = found;
  }
}

/**
 * Reads the checkpoint; `undefined` when there is none. A corrupt file is a
 * {@linkcode CorruptCheckpointError}, one of a newer schema a {@linkcode NewerCheckpointError}.
 */
export async function readCheckpoint(stateDir: string): Promise<Checkpoint | undefined> {
  const path = `${stateDir}/${CHECKPOINT_FILE}`;
  let text: string;
  try {
    // Reading a FIFO would block for ever: anything but a regular file is refused unread.
    const info = await Deno.stat(path);
    if (!info.isFile) throw new CorruptCheckpointError(path, "not a regular file");
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new CorruptCheckpointError(path, `not JSON (${(e as Error).message})`);
  }
  // Only a later whole version is a newer release's; any other wrong version is corruption.
  const version = raw && typeof raw === "object" && Object.hasOwn(raw, "version")
    ? (raw as { version: unknown }).version
    : undefined;
  if (Number.isSafeInteger(version) && (version as number) > CHECKPOINT_VERSION) {
    throw new NewerCheckpointError(path, version as number);
  }
  const r = checkpointSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    const at = i?.path.length ? ` at ${i.path.join(".")}` : "";
    throw new CorruptCheckpointError(path, `malformed${at} (${i?.message})`);
  }
  return r.data;
}

/**
 * Writes `doc` to `stateDir` atomically (base/fsync.ts). One temp name: only the daemon that
 * holds the state dir's lock writes here.
 */
export async function writeCheckpointAtomic(stateDir: string, doc: Checkpoint): Promise<void> {
  const bytes = new TextEncoder().encode(JSON.stringify(doc));
  await writeFileAtomic(`${stateDir}/${CHECKPOINT_FILE}`, bytes, 0o600, `.${CHECKPOINT_FILE}.tmp`);
}

/** Coalescing writer: `save()` resolves once a write that began after the call is durable. */
export class CheckpointWriter {
  #running: Promise<void> | undefined;
  #pending: Promise<void> | undefined;
  readonly #write: () => Promise<void>;

  /** `snapshot` is called at the start of each write to get the document to write. */
  constructor(stateDir: string, snapshot: () => Checkpoint) {
    this.#write = () => writeCheckpointAtomic(stateDir, snapshot());
  }

  /** Schedules a write and resolves when it (or a later one) is on disk. */
  save(): Promise<void> {
    if (this.#pending) return this.#pending;
    if (!this.#running) {
      this.#running = this.#write().finally(() => this.#running = undefined);
      return this.#running;
    }
    const after = this.#running;
    this.#pending = after.catch(() => {}).then(() => {
      this.#pending = undefined;
      this.#running = this.#write().finally(() => this.#running = undefined);
      return this.#running;
    });
    return this.#pending;
  }
}

/** What {@linkcode repairCheckpoint} needs to know besides the document. */
export interface RepairContext {
  /** Now, epoch ms. */
  now: number;
  /** The longest cooldown accepted, ms (`MAX_COOLDOWN_SECONDS` in ipam/config.ts). */
  maxCooldownMs: number;
  /** A pool's cooldown, ms. */
  cooldownMs: (pool: string) => number;
  /** Addresses the host routes to pods, or undefined when the kernel cannot be read. */
  routed: Set<string> | undefined;
}

/** The attachment an allocation record names. */
function attachmentOf(a: AllocationRecord): string {
  return `${a.network}/${a.containerId}/${a.ifName}`;
}

/** True when some attachment is named by more than one allocation. */
export function hasDuplicateAttachments(cp: Checkpoint): boolean {
  const seen = new Set<string>();
  for (const a of cp.allocations) {
    const k = attachmentOf(a);
    if (seen.has(k)) return true;
    seen.add(k);
  }
  return false;
}

/**
 * Makes a read checkpoint safe to reconcile, and says what it changed (one warning each):
 *
 * - An attachment named by several allocations (the daemon never writes that; a hand edit or
 *   another tool can) keeps one address: the one the host routes to a pod, else the newest
 *   ADD (`time`), else the first in the file. Every other address is held, never freed at
 *   once: while the host routes it to a pod it stays held (the kernel backstop, as after a
 *   lost checkpoint); otherwise it cools down for its pool's `ipCooldownSeconds`; when the
 *   kernel cannot be read it is held until it can.
 * - A cooldown ending later than now + the longest cooldown allowed is cut to that.
 */
export function repairCheckpoint(
  cp: Checkpoint,
  ctx: RepairContext,
): { checkpoint: Checkpoint; warnings: string[] } {
  const warnings: string[] = [];
  const groups = new Map<string, AllocationRecord[]>();
  for (const a of cp.allocations) {
    const k = attachmentOf(a);
    groups.set(k, [...groups.get(k) ?? [], a]);
  }
  const allocations: AllocationRecord[] = [];
  const extraCooldowns: CooldownRecord[] = [];
  const extraHeld: string[] = [];
  const latest = ctx.now + ctx.maxCooldownMs;
  for (const [k, list] of groups) {
    if (list.length === 1) {
      allocations.push(list[0]);
      continue;
    }
    const routed = (a: AllocationRecord) => ctx.routed?.has(a.ip) ? 1 : 0;
    const winner = list.reduce((best, a) =>
      routed(a) > routed(best) || (routed(a) === routed(best) && a.time > best.time) ? a : best
    );
    allocations.push(winner);
    const why = routed(winner)
      ? "the host routes it to a pod"
      : list.some((a) => a.time !== winner.time)
      ? "the newest ADD"
      : "first in the file";
    const fates: string[] = [];
    for (const a of list) {
      if (a === winner) continue;
      if (ctx.routed === undefined) {
        extraHeld.push(a.ip);
        fates.push(`${a.ip} held until the kernel shows no pod routed to it`);
      } else if (ctx.routed.has(a.ip)) {
        fates.push(`${a.ip} held while the host routes it to a pod`);
      } else {
        const until = Math.min(ctx.now + ctx.cooldownMs(a.pool), latest);
        extraCooldowns.push({ ip: a.ip, eniId: a.eniId, until });
        fates.push(`${a.ip} cools down until ${new Date(until).toISOString()}`);
      }
    }
    warnings.push(
      `checkpoint names attachment ${k} ${list.length} times, with addresses ` +
        `${list.map((a) => a.ip).join(" and ")}: keeping ${winner.ip} (${why}); ` +
        `${fates.join("; ")}`,
    );
  }
  const kept = new Set(allocations.map((a) => a.ip));
  const cooldowns = [...cp.cooldowns, ...extraCooldowns].filter((c) => !kept.has(c.ip)).map(
    (c) => {
      if (c.until <= latest) return c;
      warnings.push(
        `checkpoint cooldown of ${c.ip} ends ${isoOrRaw(c.until)}, later than now + ` +
          `${ctx.maxCooldownMs / 1000} s (the longest ipCooldownSeconds allows); cut to ` +
          `${new Date(latest).toISOString()}`,
      );
      return { ...c, until: latest };
    },
  );
  const held = [...cp.routedUnknown ?? [], ...extraHeld];
  return {
    checkpoint: {
      ...cp,
      allocations,
      cooldowns,
      ...(held.length ? { routedUnknown: [...new Set(held)] } : {}),
    },
    warnings,
  };
}

function isoOrRaw(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? `at ${ms} ms` : d.toISOString();
}
