/**
 * The flags every `vpcni doctor` verb shares, and how a verb runs under them: the flags
 * turned into {@linkcode DoctorOptions} (a bad one is a {@linkcode LimitsFlagError} naming
 * it), merged from `doctor` and its subcommand, a flag error turned into exit code 2, and
 * the notes gathering left printed to stderr ahead of a verb's answer.
 *
 * @module
 */
import { fileKind, netnsFileProblem } from "./kernel.ts";
import { visible } from "./printable.ts";
import type { Command } from "commander";
import type { DoctorOptions } from "./facts.ts";
import { LimitsFlagError } from "./limits.ts";
import { wrap } from "./report.ts";

const DEFAULT_DAEMON = "127.0.0.1:61679";
const DEFAULT_STATE_DIR = "/var/lib/vpcni";
const DEFAULT_CONFLIST = "/etc/cni/net.d/10-vpcni.conflist";
const DEFAULT_BIN_DIR = "/opt/cni/bin";
/** Where kubelet keeps its config unless `--kubelet-config` says otherwise. */
export const DEFAULT_KUBELET_CONFIG = "/var/lib/kubelet/config.yaml";
const DEFAULT_TIMEOUT_MS = 3000;

/** Flags common to every doctor verb (commander's camelCase). */
export interface CommonFlags {
  daemon?: string;
  stateDir?: string;
  config?: string;
  conflistFile?: string;
  binDir?: string;
  imdsEndpoint?: string;
  ec2Endpoint?: string;
  region?: string;
  kubeletMaxPods?: string;
  kubeletConfig?: string;
  timeout?: string;
  hostNetns?: string;
  json?: boolean;
}

/** Turns flags (and the daemon's environment variables) into options; errors name the flag. */
export function doctorOptions(f: CommonFlags): DoctorOptions {
  const env = (k: string) => Deno.env.get(k) || undefined;
  const listen = f.daemon ?? env("VPCNI_LISTEN") ?? DEFAULT_DAEMON;
  const daemonUrl = /^https?:\/\//.test(listen) ? listen.replace(/\/$/, "") : `http://${listen}`;
  try {
    new URL(daemonUrl);
  } catch {
    throw new LimitsFlagError(`--daemon: "${listen}" is not host:port or a URL`);
  }
  const timeout = Number(f.timeout ?? DEFAULT_TIMEOUT_MS);
  if (!Number.isInteger(timeout) || timeout < 100 || timeout > 60000) {
    throw new LimitsFlagError(`--timeout: "${f.timeout}" must be milliseconds from 100 to 60000`);
  }
  let kubeletMaxPods: number | undefined;
  if (f.kubeletMaxPods !== undefined) {
    kubeletMaxPods = Number(f.kubeletMaxPods);
    if (!/^\d+$/.test(f.kubeletMaxPods) || kubeletMaxPods < 1) {
      throw new LimitsFlagError(
        `--kubelet-max-pods: "${f.kubeletMaxPods}" must be a whole number ≥ 1`,
      );
    }
  }
  if (f.config !== undefined) {
    const problem = notAFile(f.config);
    if (problem) {
      throw new LimitsFlagError(
        `--config ${f.config}: ${problem}; name the daemon's config file, or leave --config ` +
          `out to use the defaults`,
      );
    }
  }
  if (f.hostNetns !== undefined && netnsFileProblem(f.hostNetns)) {
    throw new LimitsFlagError(
      `--host-netns ${f.hostNetns}: ${netnsFileProblem(f.hostNetns)}; give a netns file such ` +
        `as /var/run/netns/NAME or /proc/PID/ns/net`,
    );
  }
  return {
    daemonUrl,
    stateDir: f.stateDir ?? env("VPCNI_STATE_DIR") ?? DEFAULT_STATE_DIR,
    configFile: f.config,
    conflistFile: f.conflistFile ?? DEFAULT_CONFLIST,
    binDir: f.binDir ?? DEFAULT_BIN_DIR,
    imdsEndpoint: f.imdsEndpoint,
    ec2Endpoint: f.ec2Endpoint,
    region: f.region,
    kubeletMaxPods,
    kubeletConfig: f.kubeletConfig ?? DEFAULT_KUBELET_CONFIG,
    timeoutMs: timeout,
    hostNetns: f.hostNetns,
  };
}

/** Adds the flags every verb that gathers facts accepts to `c`. */
export function withCommonFlags(c: Command): Command {
  return c
    .option(
      "--daemon <host:port>",
      `daemon introspection address (env VPCNI_LISTEN; default: ${DEFAULT_DAEMON})`,
    )
    .option(
      "--state-dir <dir>",
      `daemon state dir holding the checkpoint (env VPCNI_STATE_DIR; default: ${DEFAULT_STATE_DIR})`,
    )
    .option("--config <file>", "daemon config file, read when the daemon is down")
    .option("--conflist-file <path>", `CNI conflist (default: ${DEFAULT_CONFLIST})`)
    .option("--bin-dir <dir>", `CNI bin dir (default: ${DEFAULT_BIN_DIR})`)
    .option("--imds-endpoint <url>", "IMDS endpoint (env AWS_EC2_METADATA_SERVICE_ENDPOINT)")
    .option("--ec2-endpoint <url>", "EC2 endpoint (env VPCNI_EC2_ENDPOINT)")
    .option("--region <region>", "EC2 region (default: from IMDS)")
    .option(
      "--timeout <ms>",
      `limit per request to the daemon, IMDS and EC2 (default: ${DEFAULT_TIMEOUT_MS})`,
    )
    .option("--host-netns <path>", "inspect this netns as the node's host netns")
    .option("--json", "machine-readable output");
}

/**
 * The flags of a subcommand merged with those given to `doctor` itself: commander lets the
 * parent take its options wherever they appear, so `doctor enis --json` may land on either.
 */
export function flagsOf<T extends object>(cmd: Command): T {
  const out: Record<string, unknown> = {};
  const chain: Command[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) chain.unshift(c);
  for (const c of chain) {
    for (const [k, v] of Object.entries(c.opts())) if (v !== undefined) out[k] = v;
  }
  return out as T;
}

/** Runs a verb body, turning flag errors into exit code 2 with the message. */
export async function guarded(fn: () => Promise<void> | void): Promise<void> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof LimitsFlagError) {
      console.error(wrap(visible(`vpcni doctor: ${e.message}`), 80).join("\n"));
      Deno.exitCode = 2;
      return;
    }
    throw e;
  }
}

/** Why `path` is not an existing file, or undefined when it is one. */
function notAFile(path: string): string | undefined {
  try {
    // Anything but a regular file is refused: reading a FIFO would block for ever.
    const info = Deno.statSync(path);
    return info.isFile ? undefined : `is ${fileKind(info)}, not a file`;
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "no such file" : (e as Error).message;
  }
}

/** Prints what gathering the facts noted (a source that did not answer) to stderr. */
export function printNotes(notes: string[]): void {
  for (const n of notes) console.error(wrap(`note: ${visible(n)}`, 80).join("\n"));
}
