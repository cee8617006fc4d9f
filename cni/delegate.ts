/**
 * Delegation to a standard IPAM plugin (host-local, dhcp, …) named by `ipam.type`, as the
 * spec's delegation rules say: find the executable in `CNI_PATH`, run it with the same
 * environment (only `CNI_COMMAND` set to the verb) and the same configuration on stdin,
 * and pass its CNI error on unchanged.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";
import type { CniCommand } from "./env.ts";

/** Finds `type` in the `CNI_PATH` directories; code 4/7 when it cannot. */
export function findPlugin(type: string, cniPath: string[]): string {
  if (cniPath.length === 0) {
    throw new CniError(
      ErrorCode.INVALID_ENV,
      `CNI_PATH is required to run the IPAM plugin ${JSON.stringify(type)} but is not set`,
    );
  }
  for (const dir of cniPath) {
    const candidate = `${dir}/${type}`;
    try {
      if (Deno.statSync(candidate).isFile) return candidate;
    } catch {
      // not in this directory
    }
  }
  throw new CniError(
    ErrorCode.INVALID_CONFIG,
    `invalid network configuration: ipam.type ${
      JSON.stringify(type)
    } is not an executable in CNI_PATH`,
    `searched ${cniPath.join(":")}`,
  );
}

const decoder = new TextDecoder();

/**
 * Runs the plugin executable at `path` with exactly `env` (nothing inherited), writes
 * `stdin` to it and returns its exit code and output. A plugin that exits without reading
 * its stdin still has its answer read. With `timeoutMs`, a plugin still running after that
 * long is killed (SIGKILL) and its output so far returned.
 */
export async function runPlugin(
  path: string,
  env: Record<string, string>,
  stdin: Uint8Array,
  timeoutMs?: number,
): Promise<Deno.CommandOutput> {
  const child = new Deno.Command(path, {
    env,
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = timeoutMs === undefined
    ? undefined
    : setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  try {
    const w = child.stdin.getWriter();
    try {
      await w.write(stdin);
      await w.close();
    } catch (e) {
      // A plugin that exits without reading its stdin still has an answer for us.
      if (!(e instanceof Deno.errors.BrokenPipe)) throw e;
    }
    return await child.output();
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs the IPAM plugin for `command` and returns its stdout parsed as JSON (ADD), or
 * undefined (other verbs). The plugin gets this process's environment with the CNI
 * variables of the invocation (`cniVars`, as the runtime gave them) and `CNI_COMMAND` set to
 * the verb. A failing plugin's CNI error is rethrown with its own code.
 */
export async function execIpamPlugin(
  type: string,
  command: CniCommand,
  stdin: Uint8Array,
  cniPath: string[],
  cniVars: Record<string, string>,
): Promise<unknown> {
  const path = findPlugin(type, cniPath);
  const env = { ...Deno.env.toObject(), ...cniVars, CNI_COMMAND: command };
  let out: Deno.CommandOutput;
  try {
    out = await runPlugin(path, env, stdin);
  } catch (e) {
    throw new CniError(
      ErrorCode.IO_FAILURE,
      `could not run the IPAM plugin ${path}`,
      (e as Error).message,
    );
  }
  const stdout = decoder.decode(out.stdout);
  if (out.code !== 0) {
    let parsed: { code?: unknown; msg?: unknown; details?: unknown } | undefined;
    try {
      parsed = JSON.parse(stdout);
    } catch {
      parsed = undefined;
    }
    if (parsed && typeof parsed.code === "number" && typeof parsed.msg === "string") {
      throw new CniError(
        parsed.code,
        `IPAM plugin ${type}: ${parsed.msg}`,
        typeof parsed.details === "string" ? parsed.details : undefined,
      );
    }
    throw new CniError(
      ErrorCode.IPAM_PLUGIN_FAILED,
      `IPAM plugin ${type} ${command} exited ${out.code} without a CNI error`,
      (decoder.decode(out.stderr) + stdout).trim().slice(0, 1000),
    );
  }
  if (command !== "ADD") return undefined;
  try {
    return JSON.parse(stdout);
  } catch {
    throw new CniError(
      ErrorCode.DECODE_FAILURE,
      `failed to decode the result of IPAM plugin ${type}: not JSON`,
      stdout.slice(0, 500),
    );
  }
}
