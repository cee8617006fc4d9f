/**
 * The whole program as one static module graph, for `deno bundle` (tools/image.ts): the
 * image runs this bundle for `serve`, `install`, `doctor` and the rest. main.ts imports the
 * CLI through a computed specifier to keep npm off the plugin's path, which a bundler cannot
 * follow; here both halves are imported plainly. The plugin's hot path does not come through
 * this file: the launcher runs the plugin's own bundle (cni/entry.ts) for CNI verbs.
 *
 * @module
 */
import { runPlugin } from "../cni/plugin.ts";
import { runCli } from "./program.ts";

Deno.exit(
  Deno.env.get("CNI_COMMAND") !== undefined ? await runPlugin() : await runCli(Deno.args),
);
