/**
 * vpcni entrypoint. Only dispatch lives here:
 * - `CNI_COMMAND` in the environment: the runtime is calling us as a CNI plugin;
 * - otherwise: an operator verb (`serve`, `doctor`, `sim`, `install`, `demo`, `version`).
 *
 * The plugin's thin client (cni/thin.ts) is imported statically: it has no npm, FFI or
 * netlink imports. The full plugin and the CLI are imported through computed specifiers on
 * purpose: Deno prefetches literal dynamic imports, the CLI pulls in npm packages whose
 * resolution would add ~25 ms to every pod's ADD, and the full plugin is needed only when the
 * thin client hands over (a delegated IPAM plugin, DEL with the daemon down). A dynamic
 * import at run time makes Deno check the lockfile's npm snapshot (≈ 10 ms), paid only then.
 *
 * @module
 */

import { runThinPlugin } from "./cni/thin.ts";

if (Deno.env.get("CNI_COMMAND") !== undefined) {
  // The full plugin (netlink, FFI) is loaded only when the thin client hands over to it.
  const fullModule = new URL("./cni/plugin.ts", import.meta.url).href;
  Deno.exit(
    await runThinPlugin({
      loadFull: () => import(fullModule) as Promise<typeof import("./cni/plugin.ts")>,
    }),
  );
} else {
  const cliModule = new URL("./cli/program.ts", import.meta.url).href;
  const { runCli } = await import(cliModule) as typeof import("./cli/program.ts");
  Deno.exit(await runCli(Deno.args));
}
