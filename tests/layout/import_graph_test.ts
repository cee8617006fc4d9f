/**
 * The rooms of the product and which rooms each may import from: every arrow of the import
 * graph points down. A lower layer that imports a higher one fails here with the file and
 * the import named. Tests, benchmarks and tools may import anything.
 *
 * @module
 */
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);

/** Each product room and the rooms it may import from (besides itself). */
export const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  base: [],
  netlink: ["base"],
  aws: ["base"],
  "aws/sim": ["base", "aws", "netlink"],
  proto: ["base"],
  cni: ["base", "proto", "netlink"],
  ipam: ["base", "proto", "netlink", "aws", "cni"],
  doctor: ["base", "proto", "netlink", "aws", "cni", "ipam"],
  // cli names main.ts only to run the program again (install's launcher, the demo's node).
  cli: ["base", "proto", "netlink", "aws", "aws/sim", "cni", "ipam", "doctor", "main.ts"],
  "main.ts": ["cni", "cli"],
};

/** The room a repository path belongs to, or undefined outside the product. */
function roomOf(path: string): string | undefined {
  if (path === "main.ts") return "main.ts";
  if (path.startsWith("aws/sim/")) return "aws/sim";
  const top = path.split("/")[0];
  return top in ALLOWED ? top : undefined;
}

function* tsFiles(dir: URL, prefix = ""): Generator<string> {
  for (const e of Deno.readDirSync(dir)) {
    const rel = prefix + e.name;
    if (e.isDirectory) {
      if ([".git", ".peers", ".lane", "dist", "node_modules"].includes(e.name)) continue;
      yield* tsFiles(new URL(`${e.name}/`, dir), `${rel}/`);
    } else if (e.name.endsWith(".ts")) yield rel;
  }
}

/** Relative specifiers of static imports, re-exports, dynamic imports and `new URL(…)`s. */
export function relativeImports(source: string): string[] {
  const re = /(?:\bfrom\s*|\bimport\s*\(\s*|\bnew URL\(\s*)(["'])(\.{1,2}\/[^"']+\.ts)\1/g;
  return [...source.matchAll(re)].map((m) => m[2]);
}

function resolve(from: string, spec: string): string {
  return new URL(spec, new URL(from, ROOT)).pathname.slice(ROOT.pathname.length);
}

Deno.test("layout: every import of a product room points down", () => {
  const wrong: string[] = [];
  let edges = 0;
  for (const file of tsFiles(ROOT)) {
    const from = roomOf(file);
    if (from === undefined || file.endsWith("_test.ts")) continue;
    for (const spec of relativeImports(Deno.readTextFileSync(new URL(file, ROOT)))) {
      const to = roomOf(resolve(file, spec));
      if (to === undefined || to === from) continue;
      edges++;
      if (!ALLOWED[from].includes(to)) wrong.push(`${file} imports ${spec} (${from} → ${to})`);
    }
  }
  assert.ok(edges > 50, `only ${edges} cross-room imports found: is the scan broken?`);
  assert.deepEqual(wrong, [], `imports against the layering:\n${wrong.join("\n")}`);
});

Deno.test("layout: the scan sees each kind of import", () => {
  const src = [
    `import { a } from "../netlink/mod.ts";`,
    `export { b } from './x.ts';`,
    `await import("../cli/program.ts");`,
    `new URL("./cni/plugin.ts", import.meta.url)`,
    `import x from "npm:zod";`,
  ].join("\n");
  assert.deepEqual(relativeImports(src), [
    "../netlink/mod.ts",
    "./x.ts",
    "../cli/program.ts",
    "./cni/plugin.ts",
  ]);
});
