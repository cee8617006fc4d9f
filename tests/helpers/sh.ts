/**
 * Test helpers for running peer tools (`ip`, `nft`, `cnitool`, …). Tests may shell out;
 * the product may not.
 *
 * @module
 */

/** The result of a finished command. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options for {@linkcode run}. */
export interface RunOptions {
  env?: Record<string, string>;
  stdin?: string;
  /** Run inside this named netns (`ip netns exec`). */
  netns?: string;
  cwd?: string;
}

/** Runs a command to completion and returns its output; never throws on a non-zero exit. */
export async function run(cmd: string[], opts: RunOptions = {}): Promise<RunResult> {
  const argv = opts.netns ? ["ip", "netns", "exec", opts.netns, ...cmd] : cmd;
  const child = new Deno.Command(argv[0], {
    args: argv.slice(1),
    env: opts.env,
    cwd: opts.cwd,
    stdin: opts.stdin !== undefined ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdin !== undefined) {
    const w = child.stdin.getWriter();
    try {
      await w.write(new TextEncoder().encode(opts.stdin));
      await w.close();
    } catch (e) {
      // A program may exit before reading its input; what it printed still answers.
      if (!(e instanceof Deno.errors.BrokenPipe)) throw e;
    }
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs a command and throws, with its stderr, when it exits non-zero. */
export async function sh(cmd: string[], opts: RunOptions = {}): Promise<string> {
  const r = await run(cmd, opts);
  if (r.code !== 0) {
    throw new Error(`${cmd.join(" ")} exited ${r.code}: ${r.stderr.trim() || r.stdout.trim()}`);
  }
  return r.stdout;
}

/** Runs `ip -j …` (optionally in a netns) and parses its JSON. */
export async function ipJson<T = unknown>(args: string[], netns?: string): Promise<T> {
  const out = await sh(["ip", "-j", ...args], { netns });
  return (out.trim() === "" ? [] : JSON.parse(out)) as T;
}
