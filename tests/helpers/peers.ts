/**
 * Locates peer binaries nobody here wrote (cnitool, reference plugins, moto, the metadata
 * mock). `tools/dev setup` installs them into `.peers/bin`.
 *
 * @module
 */

/** Directory holding the Go peers; `VPCNI_PEERS_BIN` overrides. */
export const PEERS_BIN: string = Deno.env.get("VPCNI_PEERS_BIN") ??
  new URL("../../.peers/bin", import.meta.url).pathname;

/** Absolute path of a peer binary, or a clear error saying how to install it. */
export function peerBin(name: string): string {
  const path = `${PEERS_BIN}/${name}`;
  try {
    Deno.statSync(path);
  } catch {
    throw new Error(`peer binary ${path} is missing: run 'bash tools/dev setup' first`);
  }
  return path;
}
