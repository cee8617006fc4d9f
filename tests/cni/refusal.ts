/**
 * What every refused request must look like, for the bad-input, hostile-netns and
 * daemon-fault suites: the spec's error JSON (and nothing else) on stdout, a non-zero exit,
 * no JavaScript stack trace on stdout or stderr, and an answer within a bound (the plugin
 * is killed past it, so a hang fails the test instead of stalling it).
 *
 * @module
 */
import assert from "node:assert/strict";
import type { PluginRun, TestNode } from "./harness.ts";
import { VPCNI_RUN_ARGS } from "../helpers/vpcni_cli.ts";

/** A JavaScript stack frame ("    at f (file:///x.ts:1:2)") or a source position. */
export const STACK_TRACE = /^\s+at\s|file:\/\/\/\S+\.ts:\d+/m;

/** Generous bound on one refused request (a process start takes well under a second). */
export const REFUSAL_BOUND_MS = 20_000;

/** A plugin run with how long it took and whether the bound killed it. */
export interface BoundedRun extends PluginRun {
  ms: number;
  killed: boolean;
}

/** Runs the vpcni launcher inside the node netns; kills it after `boundMs`. */
export async function runBounded(
  node: TestNode,
  env: Record<string, string>,
  stdin: string,
  boundMs = REFUSAL_BOUND_MS,
): Promise<BoundedRun> {
  const started = performance.now();
  const child = new Deno.Command("ip", {
    args: ["netns", "exec", node.node.name, node.bin.vpcni],
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    // The whole group: ip netns exec → sh launcher → deno.
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
  }, boundMs);
  try {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin)).catch(() => {});
    await w.close().catch(() => {});
    const out = await child.output();
    const dec = new TextDecoder();
    const stdout = dec.decode(out.stdout);
    let json: Record<string, unknown> | undefined;
    try {
      json = stdout.trim() === "" ? undefined : JSON.parse(stdout);
    } catch {
      json = undefined;
    }
    return {
      code: out.code,
      stdout,
      stderr: dec.decode(out.stderr),
      json,
      ms: performance.now() - started,
      killed,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Asserts a refusal: the spec's JSON with `code` and a matching msg, exit ≠ 0, no stack. */
export function assertRefused(
  r: BoundedRun,
  code: number,
  msg: RegExp,
  cniVersion = "1.1.0",
): void {
  assert.ok(!r.killed, `the plugin hung and was killed after ${r.ms.toFixed(0)} ms`);
  assert.notEqual(r.code, 0, `a refusal exits non-zero; stdout ${r.stdout}, stderr ${r.stderr}`);
  assert.ok(r.json, `stdout must be the error JSON, got ${JSON.stringify(r.stdout)}`);
  const e = r.json as { cniVersion: string; code: number; msg: string; details?: string };
  assert.deepEqual(
    Object.keys(e).filter((k) => k !== "details"),
    ["cniVersion", "code", "msg"],
    "the spec's error object, nothing more",
  );
  assert.equal(e.code, code, `code: ${e.msg} ${e.details ?? ""}`);
  assert.match(e.msg, msg);
  assert.equal(e.cniVersion, cniVersion);
  assert.doesNotMatch(r.stdout, STACK_TRACE, "no stack trace on stdout");
  assert.doesNotMatch(r.stderr, STACK_TRACE, "no stack trace on stderr");
}

/**
 * Installs the plugin as `vpcni install` does (a launcher running the bundled plugin with
 * the permissions of the compiled build, not --allow-all) into `<node.dir>/installed`, and
 * returns the node with that as its vpcni.
 */
export async function withInstalledPlugin(node: TestNode): Promise<TestNode> {
  const dir = `${node.dir}/installed`;
  const r = await new Deno.Command(Deno.execPath(), {
    args: [
      ...VPCNI_RUN_ARGS,
      "install",
      "--bin-dir",
      dir,
      "--skip-conflist",
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!r.success) throw new Error(`vpcni install: ${new TextDecoder().decode(r.stderr)}`);
  return { ...node, bin: { ...node.bin, vpcni: `${dir}/vpcni` } };
}
