/**
 * The plugin process's own stdin, stdout and CNI variables, shared by the thin plugin and the
 * whole plugin. Imports only base/bytes.ts: the thin path loads it for every pod.
 *
 * @module
 */

import { concatBytes } from "../base/bytes.ts";

/** The variables of the CNI environment: the spec's, and nothing else of it. */
export const CNI_VARS = [
  "CNI_COMMAND",
  "CNI_CONTAINERID",
  "CNI_NETNS",
  "CNI_IFNAME",
  "CNI_ARGS",
  "CNI_PATH",
] as const;

/**
 * Reads stdin to its end, or until more than `limit` bytes came (the caller refuses such input
 * without reading the rest). A terminal is read as empty.
 */
export function readAllStdin(limit: number): Uint8Array {
  if (Deno.stdin.isTerminal()) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  const buf = new Uint8Array(64 * 1024);
  let total = 0;
  while (total <= limit) {
    const n = Deno.stdin.readSync(buf);
    if (n === null) break;
    chunks.push(buf.slice(0, n));
    total += n;
  }
  return chunks.length === 1 ? chunks[0] : concatBytes(chunks);
}

/** Writes all of `text` to stdout (a pipe may take it in pieces). */
export function writeAllStdout(text: string): void {
  const bytes = new TextEncoder().encode(text);
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}
