/**
 * The whole program as one static module graph, for `deno bundle` (tools/image.ts): the
 * image runs this bundle for `serve`, `install`, `doctor` and the rest. main.ts imports the
 * CLI through a computed specifier to keep npm off the plugin's path, which a bundler cannot
 * follow; here both halves are imported plainly. The plugin's hot path does not come through
 * this file: the launcher runs the plugin's own bundle (cni/entry.ts) for CNI verbs.
 *
 * @module
 */
import { runThinPlugin } from "../cni/thin.ts";
import { runCli } from "./program.ts";
import { setCniWorkerEntry } from "../ipam/cni_service.ts";

// A bundle has no ipam/cni_worker.ts beside it: the daemon's CNI workers start from the
// whole plugin's bundle (cli/plugin_full.ts), which holds the worker and none of the SDK.
setCniWorkerEntry(new URL("./vpcni-plugin-full.js", import.meta.url).href);
Deno.exit(
  Deno.env.get("CNI_COMMAND") !== undefined
    ? await runThinPlugin({ loadFull: () => import("../cni/plugin.ts") })
    : await runCli(Deno.args),
);
