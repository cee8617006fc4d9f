/**
 * The daemon's claim on its state directory: the directory must be one (a file there is
 * refused, not replaced), and `ipam.lock` in it is locked without waiting — a second daemon
 * on the same directory refuses at once, naming the first one's pid, which the holder writes
 * into the lock file. A start that fails later gives back what the claim created.
 *
 * @module
 */
import { ConfigError } from "./config.ts";

/** The lock file that keeps two daemons off one state dir. */
export const LOCK_FILE = "ipam.lock";

/** Exit code of `vpcni serve` when another daemon holds the state directory. */
export const EXIT_STATE_DIR_BUSY = 3;

/** Another daemon holds the state directory's lock. */
export class StateDirBusyError extends Error {
  /** The holder's pid as its lock file says, if it says. */
  readonly holderPid: number | undefined;
  /** Builds the message from the directory and the holder's pid. */
  constructor(stateDir: string, holderPid: number | undefined) {
    const who = holderPid ? `pid ${holderPid}` : "a process that wrote no pid";
    super(
      `stateDir ${stateDir}: another vpcni serve (${who}) holds ${stateDir}/${LOCK_FILE}; ` +
        `one daemon per state directory. Stop it first (${
          holderPid ? `kill ${holderPid}, or ` : ""
        }systemctl stop vpcni), or give this one its own --state-dir and --socket`,
    );
    this.name = "StateDirBusyError";
    this.holderPid = holderPid;
  }
}

/** A held claim: the locked file, and how to give back what the claim created. */
export interface StateDirClaim {
  /** Unlocks (the lock file stays, holding the last pid). */
  release(): void;
  /** Unlocks and removes what this claim created: the lock file, the directory. */
  undo(): Promise<void>;
}

/** Why a path cannot be the state directory, for a path that exists and is no directory. */
function notADirectory(info: Deno.FileInfo): string {
  if (info.isFile) return "is a regular file";
  if (info.isSocket) return "is a socket";
  if (info.isFifo) return "is a FIFO";
  return "is not a directory";
}

/** Refuses a state directory that exists as something else; creates nothing. */
export async function checkStateDir(stateDir: string): Promise<void> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(stateDir);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return; // created at the claim
    throw ConfigError.file(`stateDir ${stateDir}: cannot be read: ${(e as Error).message}`);
  }
  if (!info.isDirectory) {
    throw ConfigError.file(
      `stateDir ${stateDir}: ${notADirectory(info)}, not a directory; the daemon keeps its ` +
        `checkpoint and lock there. Move the file away, or set stateDir (--state-dir, ` +
        `VPCNI_STATE_DIR) to a directory`,
    );
  }
}

/** What the lock file says about its holder. */
async function holderOf(path: string): Promise<number | undefined> {
  const text = await Deno.readTextFile(path).catch(() => "");
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * Creates the state directory (0700) if absent, locks `ipam.lock` without waiting and writes
 * this process's pid into it. Throws {@linkcode StateDirBusyError} when another process holds
 * it and a {@linkcode ConfigError} naming `stateDir` when it cannot be used.
 */
export async function claimStateDir(stateDir: string): Promise<StateDirClaim> {
  await checkStateDir(stateDir);
  const path = `${stateDir}/${LOCK_FILE}`;
  const dirExisted = await Deno.stat(stateDir).then(() => true, () => false);
  const unusable = (e: unknown, what: string) =>
    ConfigError.file(
      `stateDir ${stateDir}: ${what}: ${
        e instanceof Deno.errors.PermissionDenied
          ? "permission denied for the user the daemon runs as"
          : (e as Error).message
      }; run the daemon as root or set stateDir (--state-dir) to a writable directory`,
    );
  try {
    await Deno.mkdir(stateDir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw unusable(e, "cannot create it");
  }
  const fileExisted = await Deno.stat(path).then(() => true, () => false);
  let lock: Deno.FsFile;
  try {
    lock = await Deno.open(path, { read: true, write: true, create: true, mode: 0o600 });
  } catch (e) {
    if (!dirExisted) await Deno.remove(stateDir).catch(() => {});
    throw unusable(e, `cannot open ${LOCK_FILE}`);
  }
  let locked: boolean;
  try {
    locked = await lock.tryLock(true);
  } catch (e) {
    lock.close();
    throw unusable(e, `cannot lock ${LOCK_FILE}`);
  }
  if (!locked) {
    lock.close();
    throw new StateDirBusyError(stateDir, await holderOf(path));
  }
  await lock.truncate(0);
  await lock.write(new TextEncoder().encode(`${Deno.pid}\n`));
  let held = true;
  const release = () => {
    if (!held) return;
    held = false;
    lock.close();
  };
  return {
    release,
    async undo() {
      if (!fileExisted) await Deno.remove(path).catch(() => {});
      release();
      if (!dirExisted) await Deno.remove(stateDir).catch(() => {});
    },
  };
}
