/**
 * A `CNI_PATH` directory holding a `vpcni` launcher (a two-line shell script that runs this
 * repo's main.ts with `deno run`) next to links to the reference plugins, so cnitool and
 * the reference plugins can exec vpcni like any installed plugin.
 *
 * @module
 */
import { PEERS_BIN } from "./peers.ts";

/** The repo's main.ts, run by the launcher. */
export const MAIN_TS: string = new URL("../../main.ts", import.meta.url).pathname;

/** A temporary CNI_PATH directory; `remove()` deletes it. */
export interface CniBinDir {
  /** The directory (put it in CNI_PATH). */
  dir: string;
  /** The launcher's path (`<dir>/vpcni`). */
  vpcni: string;
  /** Deletes the directory. */
  remove(): Promise<void>;
}

/** The launcher script: exec `deno run` on main.ts with every argument. */
export function launcherScript(): string {
  return `#!/bin/sh\nexec deno run --allow-all --no-check ${MAIN_TS} "$@"\n`;
}

/**
 * Makes a CNI_PATH directory with the `vpcni` launcher and symlinks to every peer plugin
 * in `.peers/bin` (host-local, ptp, portmap, …).
 */
export async function makeCniBinDir(): Promise<CniBinDir> {
  const dir = await Deno.makeTempDir({ prefix: "vcn-bin-" });
  const vpcni = `${dir}/vpcni`;
  await Deno.writeTextFile(vpcni, launcherScript(), { mode: 0o755 });
  for await (const e of Deno.readDir(PEERS_BIN)) {
    if (e.name === "cnitool") continue;
    await Deno.symlink(`${PEERS_BIN}/${e.name}`, `${dir}/${e.name}`);
  }
  return { dir, vpcni, remove: () => Deno.remove(dir, { recursive: true }) };
}
