/**
 * vpcni entrypoint. Only dispatch lives here:
 * - `CNI_COMMAND` in the environment: the runtime is calling us as a CNI plugin;
 * - otherwise: an operator verb (`serve`, `doctor`, `sim`, `install`, `demo`, `version`).
 *
 * The plugin is imported statically (it has no npm imports; a dynamic import() evaluated at
 * run time would make Deno check the lockfile's npm snapshot, ≈ 10 ms per pod). The CLI
 * module is imported through a computed specifier on purpose: Deno prefetches literal
 * dynamic imports, and the CLI pulls in npm packages whose resolution would add ~25 ms to
 * every pod's ADD. The plugin path must stay free of npm.
 *
 * @module
 */

import { runPlugin } from "./cni/plugin.ts";

if (Deno.env.get("CNI_COMMAND") !== undefined) {
  Deno.exit(await runPlugin());
} else {
  const cliModule = new URL("./cli/program.ts", import.meta.url).href;
  const { runCli } = await import(cliModule) as typeof import("./cli/program.ts");
  Deno.exit(await runCli(Deno.args));
}
