/**
 * Network namespaces by path (`/run/netns/x`, `/proc/<pid>/ns/net`).
 *
 * `setns` moves only the calling thread, and Deno runs JavaScript and synchronous FFI on one
 * thread, so {@linkcode inNetns} moves that thread in, runs a synchronous block and moves it
 * back in a `finally` — also when the block throws. Nested calls return to the netns of the
 * enclosing call.
 *
 * @module
 */

import { CLONE_NEWNET, cString, errno, libc, O_CLOEXEC, O_RDONLY } from "../base/libc.ts";
import { lastError } from "./errors.ts";
import { OwnedFd } from "./owned_fd.ts";
import { checkNetnsPath } from "./validate.ts";
import { netnsOpenPath } from "../base/netns_alias.ts";

/** The thread's own netns, opened once; the bottom of the stack below. */
let homeFd: number | undefined;
/** fds of the netns entered by the active (nested) inNetns calls. */
const entered: number[] = [];

function openNetnsFd(path: string): number {
  const fd = libc().open(cString(netnsOpenPath(path)), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) throw lastError("open netns", path);
  return fd;
}

function home(): number {
  if (homeFd === undefined) homeFd = openNetnsFd("/proc/thread-self/ns/net");
  return homeFd;
}

/**
 * Runs `fn` with the calling thread inside the netns at `netnsPath` and always returns the
 * thread to the netns it was in. `fn` must be synchronous: an async function would run its
 * continuation after the thread has already moved back.
 */
export function inNetns<T>(netnsPath: string, fn: () => T): T {
  checkNetnsPath(netnsPath);
  const l = libc();
  const back = entered.length > 0 ? entered[entered.length - 1] : home();
  const target = openNetnsFd(netnsPath);
  try {
    if (l.setns(target, CLONE_NEWNET) !== 0) {
      throw lastError("setns", netnsPath);
    }
    entered.push(target);
    let result: T;
    try {
      result = fn();
    } finally {
      entered.pop();
      if (l.setns(back, CLONE_NEWNET) !== 0) {
        // Cannot happen with an fd we hold open; if it did, every later call would act in
        // the wrong netns, so stop the process rather than continue.
        const code = errno();
        console.error(`vpcni: setns back to the thread's netns failed (errno ${code})`);
        Deno.exit(70);
      }
    }
    if (result instanceof Promise) {
      throw new TypeError("inNetns: the block must be synchronous, it returned a Promise");
    }
    return result;
  } finally {
    l.close(target);
  }
}

/**
 * Moves the calling thread into the netns at `path` for good: a thread that exists to act in
 * that netns (a test's stand-in for a node, ipam/cni_worker.ts). Must be called before any
 * {@linkcode inNetns} on this thread, which then returns the thread here.
 */
export function moveThreadToNetns(path: string): void {
  checkNetnsPath(path);
  if (homeFd !== undefined || entered.length > 0) {
    throw new Error("moveThreadToNetns: the thread already entered a netns");
  }
  const fd = openNetnsFd(path);
  try {
    if (libc().setns(fd, CLONE_NEWNET) !== 0) throw lastError("setns", path);
  } finally {
    libc().close(fd);
  }
}

/** True when `path` names an existing file (a netns bind mount or /proc/<pid>/ns/net). */
export function netnsExists(path: string): boolean {
  try {
    return !Deno.statSync(netnsOpenPath(path)).isDirectory;
  } catch {
    return false;
  }
}

/** An open netns file descriptor, e.g. for IFLA_NET_NS_FD. Close it when done. */
export class NetnsHandle extends OwnedFd {
  /** The path it was opened from. */
  readonly path: string;

  private constructor(fd: number, path: string) {
    super(fd);
    this.path = path;
  }

  /** Opens the netns at `path`; a missing path is refused before any syscall. */
  static open(path: string): NetnsHandle {
    checkNetnsPath(path);
    return new NetnsHandle(openNetnsFd(path), path);
  }
}

/** The calling thread's netns as the kernel names it, e.g. "net:[4026531840]". */
export function threadNetnsId(): string {
  return Deno.readLinkSync("/proc/thread-self/ns/net");
}
