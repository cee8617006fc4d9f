/**
 * Named network namespaces (`/run/netns/NAME`, the convention iproute2 and container
 * runtimes share), made and removed with syscalls: unshare(CLONE_NEWNET) on the calling
 * thread, a bind mount of the thread's new netns onto the name, then setns back.
 *
 * @module
 */
import { errorFromErrno, InvalidInputError, lastError } from "./errors.ts";
import {
  CLONE_NEWNET,
  cString,
  errno,
  libc,
  MNT_DETACH,
  MS_BIND,
  MS_REC,
  MS_SHARED,
  O_CLOEXEC,
  O_RDONLY,
} from "../base/libc.ts";

/** Where named netns live. */
export const NETNS_RUN_DIR = "/run/netns";

function checkName(name: string): void {
  if (typeof name !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(name)) {
    throw new InvalidInputError(
      `netns name ${JSON.stringify(name)} is invalid: use 1-63 letters, digits, '.', '_' or '-'`,
    );
  }
}

/**
 * Makes the run directory a shared mount point of its own, as iproute2 does before its first
 * `netns add`. A netns mounted while the directory is still a plain directory lies under a
 * later self-bind (iproute2's, on its first run), where no path reaches it: its file can
 * then never be unlinked ("Device or resource busy"). Doing the self-bind first keeps every
 * name reachable, whichever tool runs first.
 */
function ensureRunDirMount(): void {
  Deno.mkdirSync(NETNS_RUN_DIR, { recursive: true, mode: 0o755 });
  const l = libc();
  const dir = cString(NETNS_RUN_DIR);
  const none = cString("none");
  if (l.mount(none, dir, none, BigInt(MS_SHARED | MS_REC), null) === 0) return;
  if (l.mount(dir, dir, none, BigInt(MS_BIND | MS_REC), null) !== 0) {
    throw lastError("mount", `${NETNS_RUN_DIR} (bind onto itself)`);
  }
  if (l.mount(none, dir, none, BigInt(MS_SHARED | MS_REC), null) !== 0) {
    throw lastError("mount", `${NETNS_RUN_DIR} (make shared)`);
  }
}

/**
 * Creates the named netns `name` and returns its path. Fails with an ExistsError when the
 * name is taken. The calling thread always ends in the netns it started in.
 */
export function createNamedNetns(name: string): string {
  checkName(name);
  const path = `${NETNS_RUN_DIR}/${name}`;
  ensureRunDirMount();
  try {
    Deno.writeFileSync(path, new Uint8Array(), { createNew: true, mode: 0o444 });
  } catch (e) {
    if (e instanceof Deno.errors.AlreadyExists) {
      throw errorFromErrno({ errno: 17, op: "netns add", subject: name });
    }
    throw e;
  }
  const l = libc();
  let mounted = false;
  try {
    // The netns the thread is in now (maybe inside an inNetns block): where it returns.
    const back = l.open(cString("/proc/thread-self/ns/net"), O_RDONLY | O_CLOEXEC, 0);
    if (back < 0) throw lastError("open", "own netns");
    try {
      if (l.unshare(CLONE_NEWNET) !== 0) {
        throw lastError("unshare", name);
      }
      try {
        const rc = l.mount(
          cString("/proc/thread-self/ns/net"),
          cString(path),
          cString("none"),
          BigInt(MS_BIND),
          null,
        );
        if (rc !== 0) throw lastError("mount", path);
        mounted = true;
      } finally {
        if (l.setns(back, CLONE_NEWNET) !== 0) {
          // As in inNetns: a thread stranded in the wrong netns must not go on.
          console.error(`vpcni: setns back to the thread's netns failed (errno ${errno()})`);
          Deno.exit(70);
        }
      }
    } finally {
      l.close(back);
    }
  } finally {
    if (!mounted) {
      try {
        Deno.removeSync(path);
      } catch { /* nothing to undo */ }
    }
  }
  return path;
}

/** Removes the named netns `name`; a missing one is fine. Links inside go with it. */
export function deleteNamedNetns(name: string): void {
  checkName(name);
  const path = `${NETNS_RUN_DIR}/${name}`;
  // EINVAL (not a mount point) and ENOENT are both "already gone" here. A name bound twice
  // (another tool mounted over it) has one mount per bind: take them all.
  const target = cString(path);
  for (let i = 0; i < 16 && libc().umount2(target, MNT_DETACH) === 0; i++) { /* next layer */ }
  try {
    Deno.removeSync(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
}
