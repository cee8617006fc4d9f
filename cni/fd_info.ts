/**
 * What an open file descriptor is, read through libc: its type, device and inode (fstat),
 * its filesystem (fstatfs) and, for a namespace file, the namespace type (NS_GET_NSTYPE).
 * Deno's own stat refuses every path under /proc unless the process has all permissions,
 * and the installed plugin runs with fewer; these calls need none.
 *
 * The symbols are bound on first use, apart from netlink/'s groups: only a pod's ADD, CHECK
 * and DEL (and a log file) need them. `fstat` is reached through `syscall(2)`: glibc exports
 * an `fstat` symbol only since 2.33, and nodes run older ones.
 *
 * @module
 */
import { errno } from "../base/libc.ts";

const SYMBOLS = {
  fstatfs: { parameters: ["i32", "buffer"], result: "i32" },
  // ioctl and syscall are variadic in C; every argument here is a register-sized integer
  // or pointer, which the x86-64 and AArch64 Linux calling conventions pass alike.
  ioctl: { parameters: ["i32", "u64", "pointer"], result: "i32" },
  syscall: { parameters: ["i64", "i64", "buffer"], result: "i64" },
} as const;

let bound: Deno.DynamicLibrary<typeof SYMBOLS>["symbols"] | undefined;

function fdLibc() {
  return (bound ??= Deno.dlopen("libc.so.6", SYMBOLS).symbols);
}

/** `struct stat` of the kernel's fstat: the syscall number and where st_mode sits. */
const FSTAT = Deno.build.arch === "aarch64" ? { nr: 80n, modeAt: 16 } : { nr: 5n, modeAt: 24 }; // x86_64

/** File types of `st_mode & S_IFMT`. */
export const S_IFMT = 0o170000;
/** Regular file (namespace files are regular files of nsfs). */
export const S_IFREG = 0o100000;

/** The parts of fstat(2) the plugin reads. */
export interface FdStat {
  dev: bigint;
  ino: bigint;
  /** st_mode: type and permission bits. */
  mode: number;
  size: bigint;
}

/** fstat(2) of `fd`; undefined with errno set when it fails. */
export function fdStat(fd: number): FdStat | undefined {
  const buf = new Uint8Array(256);
  if (fdLibc().syscall(FSTAT.nr, BigInt(fd), buf) !== 0n) return undefined;
  const v = new DataView(buf.buffer);
  return {
    dev: v.getBigUint64(0, true),
    ino: v.getBigUint64(8, true),
    mode: v.getUint32(FSTAT.modeAt, true),
    size: v.getBigInt64(48, true),
  };
}

/** Names a file type for messages ("a FIFO"); undefined for a regular file. */
export function fileKind(mode: number): string | undefined {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return undefined;
    case 0o040000:
      return "a directory";
    case 0o010000:
      return "a FIFO";
    case 0o140000:
      return "a unix socket";
    case 0o020000:
      return "a character device";
    case 0o060000:
      return "a block device";
    default:
      return "not a regular file";
  }
}

/** The filesystem magic (statfs f_type) of `fd`; undefined with errno set on failure. */
export function fsMagic(fd: number): bigint | undefined {
  const buf = new Uint8Array(128);
  if (fdLibc().fstatfs(fd, buf) !== 0) return undefined;
  return new DataView(buf.buffer).getBigUint64(0, true);
}

/** NS_GET_NSTYPE of a namespace fd (a CLONE_NEW* value), or the negative errno. */
export function namespaceTypeOf(fd: number): number {
  const t = fdLibc().ioctl(fd, 0xb703n, null);
  return t < 0 ? -errno() : t;
}
