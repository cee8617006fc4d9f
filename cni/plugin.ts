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
import { createLogger, type PluginLogger } from "./log.ts";
import { runIpamVerb } from "./ipam_plugin.ts";
import { cmdAdd, cmdCheck, cmdDel, cmdGc, cmdStatus, type MainInvocation } from "./main_plugin.ts";
import {
  isSupportedVersion,
  isVersionString,
  LATEST_CNI_VERSION,
  SUPPORTED_CNI_VERSIONS,
} from "./versions.ts";

/** Where one invocation reads and writes; tests substitute these. */
export interface PluginIo {
  /** Reads an environment variable. */
  getEnv(name: string): string | undefined;
  /** Reads all of stdin. */
  readStdin(): Uint8Array;
  /** Writes to stdout. */
  writeStdout(text: string): void;
}

function readAllStdin(): Uint8Array {
  if (Deno.stdin.isTerminal()) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  const buf = new Uint8Array(64 * 1024);
  let total = 0;
  for (;;) {
    const n = Deno.stdin.readSync(buf);
    if (n === null) break;
    chunks.push(buf.slice(0, n));
    total += n;
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

function writeAllStdout(text: string): void {
  const bytes = new TextEncoder().encode(text);
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

/** The process's real stdin, stdout and environment. */
export const processIo: PluginIo = {
  getEnv: (name) => Deno.env.get(name),
  readStdin: readAllStdin,
  writeStdout: writeAllStdout,
};

function readStdin(io: PluginIo): Uint8Array {
  try {
    return io.readStdin();
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

async function dispatch(
  command: CniCommand,
  env: CniEnv,
  stdin: Uint8Array,
  raw: Record<string, unknown>,
  setLog: (log: PluginLogger) => void,
): Promise<Record<string, unknown> | undefined> {
  const config = parseConfig(raw);
  const log = createLogger({
    logFile: config.logFile,
    logLevel: config.logLevel,
    context: {
      cmd: command,
      network: config.name,
      containerId: env.containerId,
      ifName: env.ifName,
    },
  });
  setLog(log);
  // Both roles are imported statically: a dynamic import() at run time makes Deno check the
  // lockfile's npm snapshot (≈ 11 ms per pod), far more than parsing the other role's code.
  if (config.role === "ipam") {
    return await runIpamVerb({ config, env, log });
  }
  const inv: MainInvocation = { config, env, stdin, log };
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

/** Runs one CNI invocation; returns the process exit code (0 success, 1 failure). */
export async function runPlugin(io: PluginIo = processIo): Promise<number> {
  let errorVersion = LATEST_CNI_VERSION;
  let log: PluginLogger | undefined;
  try {
    const command = parseCommand(io.getEnv);
    const stdin = readStdin(io);
    if (command === "VERSION") {
      io.writeStdout(JSON.stringify(versionAnswer(stdin)));
      return 0;
    }
    const raw = decodeStdin(new TextDecoder().decode(stdin));
    if (typeof raw.cniVersion === "string" && isSupportedVersion(raw.cniVersion)) {
      errorVersion = raw.cniVersion;
    }
    const env = parseCniEnv(command, io.getEnv);
    const result = await dispatch(command, env, stdin, raw, (l) => (log = l));
    if (result !== undefined) io.writeStdout(JSON.stringify(result));
    return 0;
  } catch (e) {
    const err = toCniError(e);
    const fields = { code: err.code, details: err.details };
    if (log) log.error(err.message, fields);
    else createLogger({ logLevel: "error" }).error(err.message, fields);
    io.writeStdout(JSON.stringify(errorJson(err, errorVersion)));
    return 1;
  }
}
