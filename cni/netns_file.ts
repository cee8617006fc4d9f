/**
 * Checks `CNI_NETNS` before anything acts on it: the path must name a network namespace
 * file, and not the one the plugin itself runs in (the node's). A FIFO, socket, device,
 * directory, regular file or a namespace of another type is refused with code 4 without
 * blocking: the path is opened with `O_PATH` (which never blocks, not even on a FIFO, and
 * has no side effect on devices), its type read with fstat (namespace files are regular
 * files), its filesystem must be nsfs (`fstatfs`), its namespace type `CLONE_NEWNET`
 * (`NS_GET_NSTYPE`, on a second open through `/proc/self/fd`, since ioctl needs a real
 * open), and its device and inode must differ from the plugin's own netns. Everything
 * goes through libc on the one descriptor: what is checked is what was opened.
 *
 * @module
 */
import { cString, errno, libc, O_CLOEXEC, O_RDONLY, strerror } from "../base/libc.ts";
import { CniError, ErrorCode } from "./errors.ts";
import { netnsOpenPath } from "../base/netns_alias.ts";
import { type FdStat, fdStat, fileKind, fsMagic, namespaceTypeOf } from "./fd_info.ts";

/** Longest `CNI_NETNS` accepted, in bytes (Linux's PATH_MAX less the NUL). */
export const MAX_NETNS_PATH_BYTES = 4095;

/** `f_type` of an nsfs file (linux/magic.h). */
const NSFS_MAGIC = 0x6e736673n;
/** setns(2)/clone(2) namespace types, for naming what a file is instead. */
const NS_TYPES: Record<number, string> = {
  0x00020000: "a mount",
  0x02000000: "a cgroup",
  0x04000000: "a UTS",
  0x08000000: "an IPC",
  0x10000000: "a user",
  0x20000000: "a PID",
  0x40000000: "a network",
  0x00000080: "a time",
};
const CLONE_NEWNET = 0x40000000;
const O_PATH = 0o10000000;
const O_NONBLOCK = 0o4000;
const O_NOCTTY = 0o400;
const ENOENT = 2;
const ENOTDIR = 20;
/** The netns files of the plugin's own process and thread, and of PID 1 (the host's). */
const OWN_NETNS = ["/proc/self/ns/net", "/proc/thread-self/ns/net", "/proc/1/ns/net"];

/** What the named file turned out to be. */
export type NetnsState =
  /** A network namespace other than the plugin's own. */
  | "netns"
  /** Nothing is there (or, for DEL, an empty file whose netns mount is gone). */
  | "gone";

function refuse(path: string, what: string, fix: string): CniError {
  return new CniError(
    ErrorCode.INVALID_ENV,
    `CNI_NETNS ${JSON.stringify(path)} ${what}`,
    fix,
  );
}

const NOT_A_NETNS_FIX = "CNI_NETNS must name the pod's network namespace: a bind mount such as " +
  "/run/netns/<name> or /proc/<pid>/ns/net of a process inside the pod";

/**
 * Checks the netns file `path` for `verb` (ADD, CHECK or DEL). Returns "netns" for a pod's
 * network namespace; "gone" when nothing is there (ADD and CHECK then fail with code 3:
 * the container is gone) or, for DEL only, when an empty regular file stands where a netns
 * mount was (the runtime removed the netns but not its name). Anything else is code 4.
 */
export function checkNetnsFile(path: string, verb: "ADD" | "CHECK" | "DEL"): NetnsState {
  if (new TextEncoder().encode(path).length > MAX_NETNS_PATH_BYTES) {
    throw refuse(
      `${path.slice(0, 64)}…`,
      `is longer than ${MAX_NETNS_PATH_BYTES} bytes`,
      NOT_A_NETNS_FIX,
    );
  }
  if (!path.startsWith("/") || path.includes("\0")) {
    throw refuse(path, "is not an absolute path", NOT_A_NETNS_FIX);
  }
  const c = libc();
  // O_PATH never blocks (not even on a FIFO) and opens no device.
  const fd = c.open(cString(netnsOpenPath(path)), O_PATH | O_CLOEXEC, 0);
  if (fd < 0) {
    const code = errno();
    // errno is read back after the call returned to JavaScript, which may have touched it
    // in between; "not there" lets a DEL go ahead, so Deno's own stat must agree.
    if ((code === ENOENT || code === ENOTDIR) && confirmedMissing(path)) {
      if (verb === "DEL") return "gone";
      throw new CniError(
        ErrorCode.UNKNOWN_CONTAINER,
        `container unknown: CNI_NETNS ${path} does not exist`,
      );
    }
    throw refuse(path, `cannot be opened: ${strerror(code)}`, NOT_A_NETNS_FIX);
  }
  try {
    const st = fdStat(fd);
    if (!st) throw refuse(path, `cannot be inspected: ${strerror(errno())}`, NOT_A_NETNS_FIX);
    const kind = fileKind(st.mode);
    if (kind) throw refuse(path, `is ${kind}, not a network namespace`, NOT_A_NETNS_FIX);
    const magic = fsMagic(fd);
    if (magic === undefined) {
      throw refuse(path, `cannot be inspected: ${strerror(errno())}`, NOT_A_NETNS_FIX);
    }
    if (magic !== NSFS_MAGIC) {
      // An empty file on tmpfs is what a netns name becomes once its mount is gone.
      if (verb === "DEL" && st.size === 0n) return "gone";
      throw refuse(path, "is a regular file, not a network namespace", NOT_A_NETNS_FIX);
    }
    const nstype = namespaceType(fd, path);
    if (nstype !== CLONE_NEWNET) {
      const name = NS_TYPES[nstype] ?? `a type 0x${nstype.toString(16)}`;
      throw refuse(path, `is ${name} namespace, not a network namespace`, NOT_A_NETNS_FIX);
    }
    for (const own of OWN_NETNS) {
      const mine = statPath(own);
      // /proc/1 may be hidden (hidepid); the other two are always there.
      if (mine && mine.dev === st.dev && mine.ino === st.ino) {
        throw refuse(
          path,
          "is the node's own network namespace (the one vpcni runs in), not a pod's",
          `vpcni never ${
            verb === "DEL" ? "deletes" : verb === "ADD" ? "creates" : "checks"
          } pod interfaces, addresses or routes in the node's namespace; ` +
            "the runtime must pass the pod sandbox's netns (nothing was changed)",
        );
      }
    }
    return "netns";
  } finally {
    c.close(fd);
  }
}

/**
 * True when a second look agrees that nothing is at `path`: Deno's stat, or where Deno may
 * not look (paths under /proc without all permissions) a second open.
 */
function confirmedMissing(named: string): boolean {
  const path = netnsOpenPath(named);
  try {
    Deno.statSync(path);
    return false;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return true;
  }
  const c = libc();
  const fd = c.open(cString(path), O_PATH | O_CLOEXEC, 0);
  if (fd >= 0) {
    c.close(fd);
    return false;
  }
  const code = errno();
  return code === ENOENT || code === ENOTDIR;
}

/** fstat of a path opened with O_PATH; undefined when it cannot be opened. */
function statPath(path: string): FdStat | undefined {
  const c = libc();
  const fd = c.open(cString(path), O_PATH | O_CLOEXEC, 0);
  if (fd < 0) return undefined;
  try {
    return fdStat(fd);
  } finally {
    c.close(fd);
  }
}

function namespaceType(pathFd: number, path: string): number {
  const c = libc();
  const fd = c.open(
    cString(`/proc/self/fd/${pathFd}`),
    O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
    0,
  );
  if (fd < 0) {
    const code = errno();
    throw refuse(path, `cannot be opened: ${strerror(code)}`, NOT_A_NETNS_FIX);
  }
  try {
    const t = namespaceTypeOf(fd);
    if (t < 0) throw refuse(path, `is not a namespace: ${strerror(-t)}`, NOT_A_NETNS_FIX);
    return t;
  } finally {
    c.close(fd);
  }
}

/**
 * False when the caller's mount namespace does not reach the netns at `path`: nothing is
 * there, or a regular file that is no namespace (a mount point whose netns mount is in
 * another mount namespace). The daemon asks the plugin for the netns then (ipam/cni_worker.ts).
 * Anything else is true: {@linkcode checkNetnsFile} judges it.
 */
export function netnsReachable(path: string): boolean {
  if (!path.startsWith("/") || path.includes("\0")) return true;
  const c = libc();
  const fd = c.open(cString(path), O_PATH | O_CLOEXEC, 0);
  if (fd < 0) {
    const code = errno();
    return !((code === ENOENT || code === ENOTDIR) && confirmedMissing(path));
  }
  try {
    const st = fdStat(fd);
    if (!st || fileKind(st.mode)) return true;
    const magic = fsMagic(fd);
    return magic === undefined || magic === NSFS_MAGIC;
  } finally {
    c.close(fd);
  }
}
