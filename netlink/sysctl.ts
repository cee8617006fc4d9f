/**
 * Sysctls read and written inside a given netns.
 *
 * A file under /proc/sys/net belongs to the netns of the thread that opens it, so the thread
 * enters the netns, opens and reads/writes through libc, and returns — all synchronous.
 *
 * @module
 */

import { cString, EINTR, errno, libc, O_CLOEXEC, O_RDONLY, O_WRONLY } from "../base/libc.ts";
import { errorFromErrno, InvalidInputError, lastError } from "./errors.ts";
import { inNetns } from "./netns.ts";
import { checkNetnsPath } from "./validate.ts";
import { concatBytes } from "../base/bytes.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The /proc/sys path of a key. "net.ipv4.ip_forward" and "net/ipv4/ip_forward" are the same;
 * use the slash form when a component (an interface name) contains a dot.
 */
export function sysctlPath(key: string): string {
  if (typeof key !== "string" || !/^[A-Za-z0-9_][A-Za-z0-9_.\/-]*$/.test(key)) {
    throw new InvalidInputError(
      `invalid sysctl key ${JSON.stringify(key)}: expected e.g. net.ipv4.ip_forward`,
    );
  }
  const rel = key.includes("/") ? key : key.replaceAll(".", "/");
  if (rel.split("/").some((p) => p === "" || p === "." || p === "..")) {
    throw new InvalidInputError(
      `invalid sysctl key ${JSON.stringify(key)}: empty or dot path part`,
    );
  }
  return `/proc/sys/${rel}`;
}

function openOrThrow(path: string, flags: number, op: string, key: string): number {
  const fd = libc().open(cString(path), flags | O_CLOEXEC, 0);
  if (fd < 0) throw lastError(op, key);
  return fd;
}

function readNow(path: string, key: string): string {
  const l = libc();
  const fd = openOrThrow(path, O_RDONLY, "read sysctl", key);
  try {
    const chunks: Uint8Array[] = [];
    const buf = new Uint8Array(4096);
    for (;;) {
      const n = Number(l.read(fd, buf, BigInt(buf.length)));
      if (n < 0) {
        const code = errno();
        if (code === EINTR) continue;
        throw errorFromErrno({ errno: code, op: "read sysctl", subject: key });
      }
      if (n === 0) break;
      chunks.push(buf.slice(0, n));
    }
    return decoder.decode(concatBytes(chunks)).replace(/\n$/, "");
  } finally {
    l.close(fd);
  }
}

function writeNow(path: string, key: string, value: string): void {
  const l = libc();
  const fd = openOrThrow(path, O_WRONLY, "write sysctl", key);
  try {
    const bytes = encoder.encode(value);
    for (;;) {
      const n = Number(l.write(fd, bytes, BigInt(bytes.length)));
      if (n >= 0) return;
      const code = errno();
      if (code !== EINTR) throw errorFromErrno({ errno: code, op: "write sysctl", subject: key });
    }
  } finally {
    l.close(fd);
  }
}

/** Reads a sysctl (trailing newline removed), inside `netnsPath` when given. */
export function readSysctl(key: string, netnsPath?: string): string {
  const path = sysctlPath(key);
  if (netnsPath === undefined) return readNow(path, key);
  checkNetnsPath(netnsPath);
  return inNetns(netnsPath, () => readNow(path, key));
}

/** Writes a sysctl, inside `netnsPath` when given. */
export function writeSysctl(key: string, value: string, netnsPath?: string): void {
  const path = sysctlPath(key);
  if (typeof value !== "string" || value.includes("\0")) {
    throw new InvalidInputError(`sysctl ${key}: value must be a string without NUL`);
  }
  if (netnsPath === undefined) return writeNow(path, key, value);
  checkNetnsPath(netnsPath);
  inNetns(netnsPath, () => writeNow(path, key, value));
}
