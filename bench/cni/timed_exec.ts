/**
 * Running a plugin the way a runtime does, for the CNI benches: exec, the config on stdin,
 * wait for its exit, and the wall time from spawn to exit.
 *
 * @module
 */

const decoder = new TextDecoder();

/** What one timed run gave. */
export interface TimedRun {
  /** Wall ms from spawn to exit. */
  ms: number;
  stdout: string;
  stderr: string;
}

/**
 * Execs `argv` with `env` (only `env` when `clearEnv`), writes `stdin` to it and waits for
 * it; throws with its output when it exits non-zero.
 */
export async function timedExec(
  argv: string[],
  env: Record<string, string>,
  stdin: string,
  clearEnv = false,
): Promise<TimedRun> {
  const t0 = performance.now();
  const child = new Deno.Command(argv[0], {
    args: argv.slice(1),
    env,
    clearEnv,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode(stdin));
  await w.close();
  const out = await child.output();
  const ms = performance.now() - t0;
  const stdout = decoder.decode(out.stdout);
  const stderr = decoder.decode(out.stderr);
  if (!out.success) {
    throw new Error(`${argv.join(" ")} ${env.CNI_COMMAND ?? ""} failed: ${stdout} ${stderr}`);
  }
  return { ms, stdout, stderr };
}
