/**
 * Runs the peer tools the fabric and the internet netns are built with (`ip`, `nft`,
 * `sysctl`). The simulator's fabric may shell out; the product may not.
 *
 * @module
 */

/** What a finished tool printed, and its exit code. */
export interface ToolResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `cmd` to its end, feeding it `stdin` if given; never throws on a non-zero exit. */
export async function runTool(cmd: string[], stdin?: string): Promise<ToolResult> {
  const child = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    stdin: stdin !== undefined ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs `cmd` and returns its stdout; a non-zero exit throws, naming `who` and the command. */
export async function mustRunTool(who: string, cmd: string[], stdin?: string): Promise<string> {
  const r = await runTool(cmd, stdin);
  if (r.code !== 0) {
    throw new Error(`${who}: ${cmd.join(" ")} exited ${r.code}: ${(r.stderr || r.stdout).trim()}`);
  }
  return r.stdout;
}
