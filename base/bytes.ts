/**
 * Byte arrays built from parts: the one way the product joins bytes (netlink datagrams, a
 * socket's answer read in chunks, an HTTP request, a tar archive). No npm imports: the CNI
 * plugin loads it on its hot path.
 *
 * @module
 */

/** The parts one after another in a new array (a copy even of a single part). */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
