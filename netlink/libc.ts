/**
 * The few libc functions netlink/ needs, bound through Deno FFI.
 *
 * The library is opened once, on first use, so importing netlink/ costs nothing until a
 * socket is really needed. Every symbol is synchronous: `setns` moves only the calling
 * thread, and Deno runs JavaScript and synchronous FFI calls on that same thread, so a
 * `nonblocking` symbol (run on a worker thread) would act in the wrong netns.
 *
 * @module
 */

const SYMBOLS = {
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  getsockname: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  send: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize" },
  recv: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize" },
  setns: { parameters: ["i32", "i32"], result: "i32" },
  unshare: { parameters: ["i32"], result: "i32" },
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "pointer"], result: "i32" },
  umount2: { parameters: ["buffer", "i32"], result: "i32" },
  open: { parameters: ["buffer", "i32", "u32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  getpid: { parameters: [], result: "i32" },
  __errno_location: { parameters: [], result: "pointer" },
  strerror: { parameters: ["i32"], result: "pointer" },
} as const;

/** The bound libc symbols (see `SYMBOLS` for their C signatures). */
export type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

let lib: Deno.DynamicLibrary<typeof SYMBOLS> | undefined;
let errnoView: Deno.UnsafePointerView | undefined;

/** Returns the libc bindings, opening libc.so.6 the first time. */
export function libc(): Libc {
  if (lib === undefined) lib = Deno.dlopen("libc.so.6", SYMBOLS);
  return lib.symbols;
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
  const b = encoder.encode(s);
  const out = new Uint8Array(b.length + 1);
  out.set(b);
  return out;
}

/** Constants from the Linux UAPI headers used across netlink/. */
export const AF_NETLINK = 16;
/** SOCK_RAW */
export const SOCK_RAW = 3;
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
/** umount2(2) flag: lazy detach. */
export const MNT_DETACH = 2;
/** Interrupted system call. */
export const EINTR = 4;
