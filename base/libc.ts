/**
 * The few libc functions netlink/ (and the plugin's unix-socket client) need, bound through
 * Deno FFI.
 *
 * Binding costs start-up time in every process: Deno compiles a call stub per symbol when
 * the library is opened (≈ 0.1 ms each, measured here), and the CNI plugin is a fresh
 * process per pod. So the symbols are bound in two groups, each on first use: the ones
 * every ADD and DEL calls, and the rest (sysctl writes, named netns, error text), which a
 * pod's ADD or DEL usually never touches. Every symbol is synchronous: `setns` moves only
 * the calling thread, and Deno runs JavaScript and synchronous FFI calls on that same
 * thread, so a `nonblocking` symbol (run on a worker thread) would act in the wrong netns.
 *
 * @module
 */

import { concatBytes } from "./bytes.ts";

/** Called by every pod's ADD and DEL: netlink and unix sockets, netns entry, sysctl reads. */
const CORE_SYMBOLS = {
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  connect: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  send: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize" },
  recv: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize" },
  setns: { parameters: ["i32", "i32"], result: "i32" },
  open: { parameters: ["buffer", "i32", "u32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  // In the core group although only failures read errno: binding the other group
  // calls into the dynamic loader, which may overwrite errno before it is read.
  __errno_location: { parameters: [], result: "pointer" },
} as const;

/** Called on rarer paths; bound the first time any of them is used. */
const EXTRA_SYMBOLS = {
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  unshare: { parameters: ["i32"], result: "i32" },
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "pointer"], result: "i32" },
  umount2: { parameters: ["buffer", "i32"], result: "i32" },
  strerror: { parameters: ["i32"], result: "pointer" },
} as const;

type CoreLibc = Deno.DynamicLibrary<typeof CORE_SYMBOLS>["symbols"];
type ExtraLibc = Deno.DynamicLibrary<typeof EXTRA_SYMBOLS>["symbols"];

/** The bound libc symbols (see `CORE_SYMBOLS` and `EXTRA_SYMBOLS` for their C signatures). */
export type Libc = CoreLibc & ExtraLibc;

let symbols: Libc | undefined;
let extra: ExtraLibc | undefined;
let errnoView: Deno.UnsafePointerView | undefined;

/**
 * Returns the libc bindings, opening libc.so.6 for the core group the first time; the other
 * group is opened when one of its symbols is first read.
 */
export function libc(): Libc {
  if (symbols === undefined) {
    const core = Deno.dlopen("libc.so.6", CORE_SYMBOLS).symbols;
    const all = { ...core } as Libc;
    for (const name of Object.keys(EXTRA_SYMBOLS) as (keyof ExtraLibc)[]) {
      Object.defineProperty(all, name, {
        enumerable: true,
        get: () => (extra ??= Deno.dlopen("libc.so.6", EXTRA_SYMBOLS).symbols)[name],
      });
    }
    symbols = all;
  }
  return symbols;
}

/**
 * The calling thread's `errno`. Read it right after the failing call: nothing in between
 * may call into libc.
 */
export function errno(): number {
  if (errnoView === undefined) {
    const p = libc().__errno_location();
    if (p === null) return 0;
    // errno is thread-local; the JS thread is the only thread that calls in here.
    errnoView = new Deno.UnsafePointerView(p);
  }
  return errnoView.getInt32();
}

/** The C library's text for an errno value, e.g. 17 → "File exists". */
export function strerror(code: number): string {
  const p = libc().strerror(code);
  return p === null ? `errno ${code}` : Deno.UnsafePointerView.getCString(p);
}

const encoder = new TextEncoder();

/** A NUL-terminated copy of `s`, for `const char *` parameters. */
export function cString(s: string): Uint8Array {
  return concatBytes([encoder.encode(s), new Uint8Array(1)]);
}

/** `sockaddr_un`'s `sun_path` size, its NUL included. */
export const SUN_PATH_MAX = 108;

/** A `struct sockaddr_un` for `path`; throws when the path does not fit. */
export function sockaddrUn(path: string): Uint8Array {
  const bytes = encoder.encode(path);
  if (bytes.length >= SUN_PATH_MAX) {
    throw new Error(`socket path longer than ${SUN_PATH_MAX - 1} bytes: ${path}`);
  }
  const sa = new Uint8Array(2 + SUN_PATH_MAX);
  new DataView(sa.buffer).setUint16(0, AF_UNIX, true);
  sa.set(bytes, 2);
  return sa;
}

/** A `struct timeval` of `ms` milliseconds, for SO_RCVTIMEO and SO_SNDTIMEO. */
export function timeval(ms: number): Uint8Array {
  const tv = new Uint8Array(16);
  const v = new DataView(tv.buffer);
  v.setBigInt64(0, BigInt(Math.floor(ms / 1000)), true);
  v.setBigInt64(8, BigInt((ms % 1000) * 1000), true);
  return tv;
}

/** Constants from the Linux UAPI headers used across netlink/. */
export const AF_NETLINK = 16;
/** SOCK_RAW */
export const SOCK_RAW = 3;
/** socket(2): address family of unix sockets. */
export const AF_UNIX = 1;
/** socket(2): a stream socket. */
export const SOCK_STREAM = 1;
/** send(2): a peer gone away is EPIPE, not SIGPIPE. */
export const MSG_NOSIGNAL = 0x4000;
/** setsockopt(2): receive timeout (a struct timeval). */
export const SO_RCVTIMEO = 20;
/** setsockopt(2): send timeout (a struct timeval). */
export const SO_SNDTIMEO = 21;
/** SOCK_CLOEXEC: no netlink socket leaks into a child process. */
export const SOCK_CLOEXEC = 0o2000000;
/** NETLINK_ROUTE protocol number. */
export const NETLINK_ROUTE = 0;
/** SOL_SOCKET level. */
export const SOL_SOCKET = 1;
/** SO_SNDBUF */
export const SO_SNDBUF = 7;
/** SO_RCVBUF */
export const SO_RCVBUF = 8;
/** SOL_NETLINK level. */
export const SOL_NETLINK = 270;
/** Don't echo the request in error messages. */
export const NETLINK_CAP_ACK = 10;
/** Ask the kernel for extended-ack error text. */
export const NETLINK_EXT_ACK = 11;
/** open(2) flags. */
export const O_RDONLY = 0;
/** O_WRONLY */
export const O_WRONLY = 1;
/** O_CLOEXEC */
export const O_CLOEXEC = 0o2000000;
/** setns(2) nstype for network namespaces. */
export const CLONE_NEWNET = 0x40000000;
/** mount(2) flag: bind mount. */
export const MS_BIND = 4096;
/** mount(2) flag: apply to the whole subtree. */
export const MS_REC = 16384;
/** mount(2) flag: make the mount's propagation shared. */
export const MS_SHARED = 1 << 20;
/** umount2(2) flag: lazy detach. */
export const MNT_DETACH = 2;
/** Interrupted system call. */
export const EINTR = 4;
