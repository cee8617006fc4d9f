/**
 * A small ustar writer for `doctor bundle`: regular files only, gzip-compressed with
 * node:zlib. Enough for `tar xzf` and every archive tool; no shelling out.
 *
 * @module
 */
import { gzipSync } from "node:zlib";
import { concatBytes } from "../base/bytes.ts";

/** One file of the archive. */
export interface TarFile {
  /** Path inside the archive, "/"-separated, without a leading slash. */
  name: string;
  data: Uint8Array | string;
  /** Permission bits (default 0o644). */
  mode?: number;
  /** Seconds since the epoch (default now). */
  mtime?: number;
}

const enc = new TextEncoder();

function octal(n: number, width: number): string {
  // width includes the terminating NUL
  return n.toString(8).padStart(width - 1, "0") + "\0";
}

function splitName(name: string): { name: string; prefix: string } {
  const bytes = enc.encode(name);
  if (bytes.length <= 100) return { name, prefix: "" };
  // ustar: prefix (≤155) + "/" + name (≤100), split at a slash.
  for (let i = name.length - 1; i > 0; i--) {
    if (name[i] !== "/") continue;
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (enc.encode(prefix).length <= 155 && enc.encode(rest).length <= 100) {
      return { name: rest, prefix };
    }
  }
  throw new RangeError(`tar: path too long for ustar: ${name}`);
}

function header(f: TarFile, size: number): Uint8Array {
  const h = new Uint8Array(512);
  const put = (text: string, at: number, max: number) => {
    const b = enc.encode(text);
    h.set(b.subarray(0, max), at);
  };
  const { name, prefix } = splitName(f.name);
  put(name, 0, 100);
  put(octal(f.mode ?? 0o644, 8), 100, 8);
  put(octal(0, 8), 108, 8); // uid
  put(octal(0, 8), 116, 8); // gid
  put(octal(size, 12), 124, 12);
  put(octal(Math.floor(f.mtime ?? Date.now() / 1000), 12), 136, 12);
  put("        ", 148, 8); // checksum placeholder: spaces while summing
  put("0", 156, 1); // regular file
  put("ustar\0", 257, 6);
  put("00", 263, 2);
  put("root", 265, 32);
  put("root", 297, 32);
  put(prefix, 345, 155);
  let sum = 0;
  for (const b of h) sum += b;
  put(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8);
  return h;
}

/** Builds an uncompressed tar archive. */
export function tar(files: TarFile[]): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const f of files) {
    const data = typeof f.data === "string" ? enc.encode(f.data) : f.data;
    const h = header(f, data.length);
    const pad = (512 - (data.length % 512)) % 512;
    parts.push(h, data, new Uint8Array(pad));
  }
  parts.push(new Uint8Array(1024)); // two zero blocks end the archive
  return concatBytes(parts);
}

/** Builds a gzip-compressed tar archive. */
export function tarGz(files: TarFile[]): Uint8Array {
  return new Uint8Array(gzipSync(tar(files)));
}
