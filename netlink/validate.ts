/**
 * Checks run before any syscall, so bad input changes nothing and says what was wrong.
 *
 * @module
 */

import { InvalidInputError } from "./errors.ts";
import { netnsOpenPath } from "../base/netns_alias.ts";

const encoder = new TextEncoder();

/** Longest interface name the kernel accepts, in bytes (IFNAMSIZ - 1). */
export const MAX_IFNAME_BYTES = 15;

/** Refuses a name the kernel's dev_valid_name() would refuse. */
export function checkIfName(name: unknown, what = "interface name"): string {
  if (typeof name !== "string" || name === "") {
    throw new InvalidInputError(`${what} must be a non-empty string`);
  }
  const bytes = encoder.encode(name).length;
  if (bytes > MAX_IFNAME_BYTES) {
    throw new InvalidInputError(
      `${what} ${
        JSON.stringify(name)
      } is ${bytes} bytes; the kernel allows at most ${MAX_IFNAME_BYTES}`,
    );
  }
  if (name === "." || name === "..") {
    throw new InvalidInputError(`${what} ${JSON.stringify(name)} is not allowed`);
  }
  if (/[/:\s\0]/.test(name)) {
    throw new InvalidInputError(
      `${what} ${JSON.stringify(name)} must not contain '/', ':', NUL or whitespace`,
    );
  }
  return name;
}

/** Refuses anything but an integer in [min, max]. */
export function checkInt(v: unknown, min: number, max: number, what: string): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw new InvalidInputError(`${what} must be an integer in ${min}..${max}, got ${String(v)}`);
  }
  return v;
}

/** Refuses a u32 out of 0..2^32-1 (rule priorities, tables, marks). */
export function checkU32(v: unknown, what: string): number {
  return checkInt(v, 0, 0xffffffff, what);
}

/** Refuses an MTU the kernel could never take. */
export function checkMtu(v: unknown): number {
  return checkInt(v, 68, 65535, "MTU");
}

/** Refuses a netns path that is not there (or is not a file the kernel could open). */
export function checkNetnsPath(path: unknown): string {
  if (typeof path !== "string" || path === "") {
    throw new InvalidInputError("netns path must be a non-empty string");
  }
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(netnsOpenPath(path));
  } catch {
    throw new InvalidInputError(`netns path ${path} does not exist`);
  }
  if (info.isDirectory) {
    throw new InvalidInputError(`netns path ${path} is a directory, not a netns file`);
  }
  return path;
}
