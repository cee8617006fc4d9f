/**
 * The path to open for a pod netns that the code names by the runtime's `CNI_NETNS`.
 *
 * The daemon runs a pod's verb for the plugin; when the runtime mounted the pod's netns where
 * the daemon's mount namespace does not reach, the plugin opens it and hands the daemon the
 * open file (ipam/netns_fds.ts). The verb then still names the netns by the runtime's path —
 * in its result (`sandbox`), its errors, its logs and the reservation — while every open of
 * that netns goes through `/proc/self/fd/<n>` instead. One alias at a time, per thread: a CNI
 * worker (ipam/cni_worker.ts) runs one verb at a time.
 *
 * @module
 */

let alias: { named: string; open: string } | undefined;

/** While a verb runs: open `open` wherever the netns `named` is opened. */
export function setNetnsAlias(named: string, open: string): void {
  alias = { named, open };
}

/** The verb is done: paths are opened as named again. */
export function clearNetnsAlias(): void {
  alias = undefined;
}

/** The path to open for the netns named `path` (itself, unless an alias is set for it). */
export function netnsOpenPath(path: string): string {
  return alias !== undefined && alias.named === path ? alias.open : path;
}
