/**
 * The CNI plugin alone, as one program. `vpcni install`, run from source, bundles this file
 * into one JavaScript file (`deno bundle`) that its launcher runs for every CNI verb: one
 * file loads faster than the plugin's modules one by one, and a runtime execs the plugin for
 * every pod. (`main.ts` stays the entry for everything else, and for the compiled build.)
 *
 * @module
 */
import { runThinPlugin } from "./thin.ts";

// The bundler inlines the full plugin behind this import: it is parsed lazily and evaluated
// only when the thin path hands over (cni/thin.ts says when).
Deno.exit(await runThinPlugin({ loadFull: () => import("./plugin.ts") }));
