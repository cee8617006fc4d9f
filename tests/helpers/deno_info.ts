/**
 * The module graph of a program in this repository as `deno info --json` reports it, for
 * tests that check what a process loads.
 *
 * @module
 */
import assert from "node:assert/strict";

/** One module of the graph. */
export interface InfoModule {
  specifier: string;
  /** Its size in bytes. */
  size?: number;
  dependencies?: {
    code?: { specifier: string };
    type?: { specifier: string };
    isDynamic?: boolean;
  }[];
}

/** The graph: its roots, every module, and the specifiers that redirect to another. */
export interface ModuleInfo {
  roots: string[];
  modules: InfoModule[];
  redirects: Record<string, string>;
}

/** Runs `deno info --json` on `root` (a path from the repository's top); fails on an error. */
export async function denoInfo(root: string): Promise<ModuleInfo> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", new URL(`../../${root}`, import.meta.url).pathname],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout)) as ModuleInfo;
}
