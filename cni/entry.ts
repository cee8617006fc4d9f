/**
 * The CNI plugin's thin client alone, as one program. `vpcni install`, run from source, and
 * the image bundle this file into one JavaScript file (`deno bundle`) that the launcher runs
 * for every CNI verb: one file loads faster than the modules one by one, and a runtime execs
 * the plugin for every pod. The whole plugin is a second bundle beside it (cli/plugin_full.ts
 * as its entry). (`main.ts` stays the entry for everything else, and for the compiled build.)
 *
 * @module
 */
import { type FullPlugin, runThinPlugin } from "./thin.ts";

/**
 * The whole plugin (cni/plugin.ts), bundled on its own beside this file: loaded only when the
 * thin path hands over (cni/thin.ts says when). A computed specifier, so the bundler leaves it
 * out of this bundle: the thin plugin's bundle is ≈ 13 KB instead of ≈ 196 KB, ≈ 2 ms less
 * per process (measured here).
 */
export const FULL_PLUGIN_BUNDLE = "vpcni-plugin-full.js";

const full = new URL(`./${FULL_PLUGIN_BUNDLE}`, import.meta.url).href;
Deno.exit(await runThinPlugin({ loadFull: () => import(full) as Promise<FullPlugin> }));
