/**
 * What the plugin process loads on its path through the daemon: the static module graph of
 * the thin client, from each way the plugin is started (main.ts from source, cni/entry.ts as
 * bundled at install). It must hold no netlink/ (FFI, netns), no npm package and none of the
 * full plugin's datapath, which load only when the thin client hands over (cni/thin.ts).
 */
import assert from "node:assert/strict";
import { denoInfo } from "../helpers/deno_info.ts";

/** The modules `root` loads before any dynamic import, with their sizes in bytes. */
async function staticGraph(root: string): Promise<Map<string, number>> {
  const info = await denoInfo(root);
  const bySpec = new Map(info.modules.map((m) => [m.specifier, m]));
  const seen = new Map<string, number>();
  const todo = [...info.roots];
  while (todo.length) {
    const s = todo.pop()!;
    if (seen.has(s)) continue;
    const m = bySpec.get(s);
    seen.set(s, m?.size ?? 0);
    for (const d of m?.dependencies ?? []) {
      if (d.isDynamic || !d.code) continue;
      todo.push(d.code.specifier);
    }
  }
  return seen;
}

for (const root of ["main.ts", "cni/entry.ts"]) {
  Deno.test(`the thin plugin's static graph from ${root} has no netlink, no datapath, no npm`, async () => {
    const graph = await staticGraph(root);
    const names = [...graph.keys()].map((s) => s.replace(/^.*\/thin-plugin\//, ""));
    const bad = [...graph.keys()].filter((s) =>
      s.startsWith("npm:") || s.includes("/node_modules/") || s.includes("/netlink/") ||
      s.includes("/cni/datapath/") || s.includes("/ipam/") || s.endsWith("/cni/plugin.ts")
    );
    assert.deepEqual(bad, [], `modules the thin path must not load:\n${bad.join("\n")}`);
    assert.ok(
      [...graph.keys()].some((s) => s.endsWith("/cni/thin.ts")),
      `the graph holds the thin client: ${names.join(", ")}`,
    );
    const bytes = [...graph.values()].reduce((a, b) => a + b, 0);
    console.log(`${root}: ${graph.size} modules, ${bytes} bytes: ${names.join(", ")}`);
  });
}
