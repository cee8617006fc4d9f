/**
 * DELs the daemon did not see. When the daemon is down, the plugin's DEL removes the pod's
 * host objects itself and succeeds (the runtime must not be kept waiting); the reservation
 * it could not release is written down as a record in a directory beside the daemon's socket,
 * `<socket>.pending-dels/`. The daemon releases what the records name before it serves its
 * first request and again on every loop step, then removes them. A record never frees an
 * address that a later ADD of the same attachment took: it carries the DEL's time, and an
 * allocation made after it is left alone.
 *
 * Owned by neither side, as proto/ipam.ts: the full plugin writes, the daemon reads. No npm.
 *
 * @module
 */
import { writeFileAtomic } from "../base/fsync.ts";

/** One DEL the daemon did not see. */
export interface DelRecord {
  /** The record format. */
  version: 1;
  network: string;
  containerId: string;
  ifName: string;
  /** CNI_NETNS of the DEL, when the runtime gave one. */
  netns?: string;
  /** When the DEL ran (epoch ms). */
  time: number;
}

/** A record file read back: where it is and what it says (undefined: unreadable). */
export interface DelRecordFile {
  path: string;
  record?: DelRecord;
  /** Why it could not be read, when it could not. */
  problem?: string;
}

/** Records beyond this many are left for the next pass (each is a few hundred bytes). */
export const MAX_DEL_RECORDS_PER_PASS = 10_000;
/** A record file is a few hundred bytes; anything far larger is not one. */
const MAX_RECORD_BYTES = 16 * 1024;

/** The directory of the records that belong to the daemon listening on `socketPath`. */
export function delRecordDir(socketPath: string): string {
  return `${socketPath}.pending-dels`;
}

/**
 * Writes the record of a DEL, atomically (a temp file renamed into place), in a directory
 * only root may enter. Each DEL gets its own file, so concurrent DELs never contend.
 */
export async function writeDelRecord(socketPath: string, rec: DelRecord): Promise<string> {
  const dir = delRecordDir(socketPath);
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  const path = `${dir}/${rec.time}-${crypto.randomUUID()}.json`;
  await writeFileAtomic(path, new TextEncoder().encode(JSON.stringify(rec) + "\n"), 0o600);
  return path;
}

/** Parses one record; throws a message naming what is wrong. */
export function parseDelRecord(text: string): DelRecord {
  const v: unknown = JSON.parse(text);
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
  const o = v as Record<string, unknown>;
  if (o.version !== 1) throw new Error(`version ${JSON.stringify(o.version)}, not 1`);
  for (const k of ["network", "containerId", "ifName"] as const) {
    if (typeof o[k] !== "string" || o[k] === "") throw new Error(`${k} is not a non-empty string`);
  }
  if (o.netns !== undefined && typeof o.netns !== "string") throw new Error("netns not a string");
  if (typeof o.time !== "number" || !Number.isFinite(o.time) || o.time <= 0) {
    throw new Error("time is not a positive number");
  }
  return {
    version: 1,
    network: o.network as string,
    containerId: o.containerId as string,
    ifName: o.ifName as string,
    ...(o.netns !== undefined ? { netns: o.netns as string } : {}),
    time: o.time,
  };
}

/**
 * The record files in the directory of `socketPath`, oldest first (at most
 * {@linkcode MAX_DEL_RECORDS_PER_PASS}); none when the directory does not exist. Temp files
 * of a write in progress (dot files) are not records yet.
 */
export async function readDelRecords(socketPath: string): Promise<DelRecordFile[]> {
  const dir = delRecordDir(socketPath);
  const names: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      if (e.isFile && !e.name.startsWith(".") && e.name.endsWith(".json")) names.push(e.name);
    }
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw e;
  }
  names.sort((a, b) => Number.parseInt(a) - Number.parseInt(b) || a.localeCompare(b));
  const out: DelRecordFile[] = [];
  for (const name of names.slice(0, MAX_DEL_RECORDS_PER_PASS)) {
    const path = `${dir}/${name}`;
    try {
      const info = await Deno.lstat(path);
      if (info.size > MAX_RECORD_BYTES) throw new Error(`${info.size} bytes, not a record`);
      out.push({ path, record: parseDelRecord(await Deno.readTextFile(path)) });
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) continue; // removed meanwhile
      out.push({ path, problem: (e as Error).message });
    }
  }
  return out;
}
