/**
 * The CNI plugin alone, as one program. `vpcni install`, run from source, bundles this file
 * into one JavaScript file (`deno bundle`) that its launcher runs for every CNI verb: one
 * file loads faster than the plugin's modules one by one, and a runtime execs the plugin for
 * every pod. (`main.ts` stays the entry for everything else, and for the compiled build.)
 *
 * @module
 */
import { runPlugin } from "./plugin.ts";

Deno.exit(await runPlugin());
