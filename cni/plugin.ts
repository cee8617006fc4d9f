/**
 * The CNI plugin entry: reads the CNI environment and stdin, runs the verb in the role the
 * configuration asks for, and writes the result — or the spec's error JSON — to stdout.
 * Logs never go to stdout. Must not import npm packages (hot path: one process per pod).
 *
 * @module
 */
import { decodeStdin, parseConfig } from "./config.ts";
import { type CniCommand, type CniEnv, parseCniEnv, parseCommand } from "./env.ts";
import { CniError, ErrorCode, errorJson, toCniError } from "./errors.ts";
import { checkLogFile, createLogger, type PluginLogger } from "./log.ts";
import { checkStdinSize, INPUT_BOUNDS } from "./bounds.ts";
import { checkNetnsFile } from "./netns_file.ts";

export { sendNetnsFd } from "./netns_fd_send.ts";

/**
 * True when `path` names a pod's network namespace in this process's mount namespace (the
 * runtime's, where the plugin runs): the thin plugin asks when a daemon said it is not one.
 */
export function netnsIsHere(path: string): boolean {
  try {
    return checkNetnsFile(path, "ADD") === "netns";
  } catch {
    return false;
  }
}
import { readAllStdin, writeAllStdout } from "./process_io.ts";
import { runIpamVerb } from "./ipam_plugin.ts";
import { cmdAdd, cmdCheck, cmdDel, cmdGc, cmdStatus, type MainInvocation } from "./main_plugin.ts";
import {
  hasCheck,
  isSupportedVersion,
  isVersionString,
  LATEST_CNI_VERSION,
  SUPPORTED_CNI_VERSIONS,
} from "./versions.ts";

/** Where one invocation reads and writes; tests substitute these. */
export interface PluginIo {
  /** Reads an environment variable. */
  getEnv(name: string): string | undefined;
  /**
   * Reads stdin: all of it, or at least `limit + 1` bytes when there is more than `limit`
   * (the plugin refuses such input without reading the rest).
   */
  readStdin(limit: number): Uint8Array;
  /** Writes to stdout. */
  writeStdout(text: string): void;
}

/** The process's real stdin, stdout and environment. */
export const processIo: PluginIo = {
  getEnv: (name) => Deno.env.get(name),
  readStdin: readAllStdin,
  writeStdout: writeAllStdout,
};

function readStdin(io: PluginIo): Uint8Array {
  try {
    return io.readStdin(INPUT_BOUNDS.stdinBytes);
  } catch (e) {
    throw new CniError(
      ErrorCode.IO_FAILURE,
      "failed to read the network configuration from stdin",
      (e as Error).message,
    );
  }
}

/** VERSION: echo the caller's cniVersion and list the versions vpcni speaks. */
function versionAnswer(stdin: Uint8Array): Record<string, unknown> {
  let asked: unknown;
  try {
    asked = (JSON.parse(new TextDecoder().decode(stdin)) as { cniVersion?: unknown }).cniVersion;
  } catch {
    asked = undefined;
  }
  const cniVersion = typeof asked === "string" && isVersionString(asked)
    ? asked
    : LATEST_CNI_VERSION;
  return { cniVersion, supportedVersions: SUPPORTED_CNI_VERSIONS };
}

/**
 * Checks `CNI_NETNS` for the verbs that act on it (both roles: the IPAM role records it for
 * the daemon). Returns the environment to run with: for a DEL whose netns is gone, without
 * `CNI_NETNS`, so only the node's side is cleaned up.
 */
function checkNetns(env: CniEnv, cniVersion: string): CniEnv {
  const verb = env.command;
  if (env.netns === undefined || (verb !== "ADD" && verb !== "CHECK" && verb !== "DEL")) {
    return env;
  }
  // A CHECK the config's version does not have is refused with code 1 by the verb itself,
  // before anything is opened: the spec puts version errors first.
  if (verb === "CHECK" && !hasCheck(cniVersion)) return env;
  const state = checkNetnsFile(env.netns, verb);
  return state === "gone" ? { ...env, netns: undefined } : env;
}

/** How the thin plugin (cni/thin.ts) runs the full one. */
export interface RunOptions {
  /**
   * The thin plugin found the daemon down: a DEL removes the pod's host objects and succeeds
   * without the daemon, leaving a record the daemon releases it by (proto/del_records.ts).
   */
  daemonDown?: boolean;
}

async function dispatch(
  command: CniCommand,
  parsedEnv: CniEnv,
  stdin: Uint8Array,
  raw: Record<string, unknown>,
  setLog: (log: PluginLogger) => void,
  opts: RunOptions,
): Promise<Record<string, unknown> | undefined> {
  const config = parseConfig(raw);
  checkLogFile(config.logFile, config.role === "ipam" ? "ipam.logFile" : "logFile");
  const log = createLogger({
    logFile: config.logFile,
    logLevel: config.logLevel,
    context: {
      cmd: command,
      network: config.name,
      containerId: parsedEnv.containerId,
      ifName: parsedEnv.ifName,
    },
  });
  setLog(log);
  // After the logger: a refused netns is logged where the operator looks.
  const env = checkNetns(parsedEnv, config.cniVersion);
  // Both roles are imported statically: a dynamic import() at run time makes Deno check the
  // lockfile's npm snapshot (≈ 11 ms per pod), far more than parsing the other role's code.
  if (config.role === "ipam") {
    return await runIpamVerb({ config, env, log });
  }
  const inv: MainInvocation = { config, env, stdin, log, daemonDown: opts.daemonDown };
  switch (command) {
    case "ADD":
      return await cmdAdd(inv);
    case "DEL":
      await cmdDel(inv);
      return undefined;
    case "CHECK":
      await cmdCheck(inv);
      return undefined;
    case "GC":
      await cmdGc(inv);
      return undefined;
    case "STATUS":
      await cmdStatus(inv);
      return undefined;
    default:
      throw new Error(`unexpected command ${command}`);
  }
}

/**
 * Runs one CNI invocation; returns the process exit code (0 success, 1 failure). Every
 * failure is printed as the spec's error JSON; a stack trace reaches only the log file, at
 * debug level.
 */
export async function runPlugin(
  io: PluginIo = processIo,
  opts: RunOptions = {},
): Promise<number> {
  let errorVersion = LATEST_CNI_VERSION;
  let log: PluginLogger | undefined;
  let doing = "the request";
  try {
    const command = parseCommand(io.getEnv);
    doing = command;
    const stdin = readStdin(io);
    checkStdinSize(stdin.length);
    if (command === "VERSION") {
      io.writeStdout(JSON.stringify(versionAnswer(stdin)));
      return 0;
    }
    const raw = decodeStdin(new TextDecoder().decode(stdin));
    if (typeof raw.cniVersion === "string" && isSupportedVersion(raw.cniVersion)) {
      errorVersion = raw.cniVersion;
    }
    const env = parseCniEnv(command, io.getEnv);
    const result = await dispatch(command, env, stdin, raw, (l) => (log = l), opts);
    if (result !== undefined) io.writeStdout(JSON.stringify(result));
    return 0;
  } catch (e) {
    const err = toCniError(e, doing);
    const out = errorJson(err, errorVersion);
    const fields = { code: out.code, details: out.details };
    const logger = log ?? createLogger({ logLevel: "error" });
    logger.error(out.msg, fields);
    if (e instanceof Error && e.stack) {
      // The cause's stack, when a step kept it in details, and where the error was made.
      logger.debugToFile("stack of the failure", { stack: e.stack, cause: err.details });
    }
    io.writeStdout(JSON.stringify(out));
    return 1;
  } finally {
    log?.close();
  }
}
