/**
 * Read-only snapshots of a network namespace through netlink/: links, addresses, routes
 * (every table), rules and neighbours, plus the sysctls the datapaths depend on. Plain
 * data, so the datapath check can compare it and the bundle can store it as JSON.
 *
 * @module
 */
import { type Link, NetlinkSocket } from "../netlink/mod.ts";
import { type NetnsView, readNetnsView, readSysctls } from "../cni/datapath/view.ts";
import { viewSysctlKeys } from "../cni/datapath/compare.ts";

export { readSysctls };

/**
 * Everything doctor reads from one netns: the view CNI CHECK judges too
 * (cni/datapath/view.ts), so one comparator judges both.
 */
export interface NetnsSnapshot extends NetnsView {
  /** The netns path, or "" for doctor's own netns. */
  netns: string;
}

/**
 * The device of nsfs, where every namespace file lives; read once. Deno refuses to stat
 * /proc/PID/… without --allow-all (the build does not grant it): then it stays unknown and
 * only the file type is checked — enough not to block, as opening a regular file never does.
 */
let nsfsDev: number | undefined | null;

function nsfsDevice(): number | undefined {
  if (nsfsDev === undefined) {
    try {
      nsfsDev = Deno.statSync("/proc/thread-self/ns/net").dev;
    } catch {
      nsfsDev = null;
    }
  }
  return nsfsDev ?? undefined;
}

/** What a file is, in a few words, for one that is not what was wanted. */
export function fileKind(info: Deno.FileInfo): string {
  if (info.isFifo) return "a FIFO";
  if (info.isSocket) return "a socket";
  if (info.isDirectory) return "a directory";
  if (info.isCharDevice) return "a character device";
  if (info.isBlockDevice) return "a block device";
  if (info.isFile) return "a regular file";
  return "not a regular file";
}

/**
 * Why `path` is not a namespace file, or undefined when it is one. Looks with stat only:
 * opening a FIFO would block, so nothing is opened before its type is known. A namespace file
 * (`/proc/PID/ns/net`, a bind mount under /run/netns) is a regular file on nsfs.
 */
export function netnsFileProblem(path: string): string | undefined {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "no such file" : (e as Error).message;
  }
  if (!info.isFile) return `is ${fileKind(info)}, not a network namespace`;
  const nsfs = nsfsDevice();
  if (nsfs !== undefined && info.dev !== nsfs) return "is a regular file, not a network namespace";
  return undefined;
}

/**
 * Takes a snapshot of `netns` (a path), or of the calling thread's netns when "". A path that
 * is not a namespace file is refused before it is opened.
 */
export function snapshotNetns(netns = ""): NetnsSnapshot {
  if (netns !== "") {
    const problem = netnsFileProblem(netns);
    if (problem) throw new Error(`netns ${netns}: ${problem}; not read`);
  }
  const s = netns === "" ? NetlinkSocket.open() : NetlinkSocket.openIn(netns);
  try {
    return { netns, ...readNetnsView(s) };
  } finally {
    s.close();
  }
}

/** True when a netns path exists and is a namespace file (never opened to find out). */
export function podNetnsExists(path: string): boolean {
  return netnsFileProblem(path) === undefined;
}

/**
 * Sysctl keys that matter in a netns with these links: those the datapath comparator judges
 * (forwarding, each link's rp_filter, proxy ARP), and rp_filter of "all".
 */
export function hostSysctlKeys(links: Link[]): string[] {
  return ["net.ipv4.conf.all.rp_filter", ...viewSysctlKeys(links)];
}

/** Name of the link with ifindex `index` in a snapshot, or `#index`. */
export function linkName(snap: NetnsSnapshot, index: number | undefined): string {
  if (index === undefined) return "?";
  return snap.links.find((l) => l.index === index)?.name ?? `#${index}`;
}
