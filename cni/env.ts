/**
 * The CNI environment: `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`,
 * `CNI_ARGS` and `CNI_PATH`, parsed per verb as the spec requires. A missing or malformed
 * variable is code 4 with a message that names it.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";

/** The verbs of CNI 1.1. */
export type CniCommand = "ADD" | "DEL" | "CHECK" | "STATUS" | "GC" | "VERSION";

/** Every verb, in the order the spec lists them. */
export const CNI_COMMANDS: readonly CniCommand[] = [
  "ADD",
  "DEL",
  "CHECK",
  "STATUS",
  "VERSION",
  "GC",
];

/** Keys of `CNI_ARGS` that vpcni understands. */
export interface CniArgs {
  ignoreUnknown: boolean;
  podNamespace?: string;
  podName?: string;
  podUid?: string;
  podInfraContainerId?: string;
}

/** The parsed environment of one invocation. */
export interface CniEnv {
  command: CniCommand;
  containerId?: string;
  netns?: string;
  ifName?: string;
  args: CniArgs;
  /** `CNI_PATH` split on ':'; empty when unset. */
  path: string[];
}

function badEnv(name: string, why: string, details?: string): CniError {
  return new CniError(ErrorCode.INVALID_ENV, `${name} ${why}`, details);
}

const CONTAINER_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.\-]*$/;

/** Checks an interface name as the spec and Linux require; returns a reason or undefined. */
export function ifNameProblem(name: string): string | undefined {
  if (name === "") return "must not be empty";
  if (name === "." || name === "..") return `must not be "${name}"`;
  if (new TextEncoder().encode(name).length > 15) return "must be shorter than 16 bytes";
  if (/[/:\s]/.test(name)) return "must not contain '/', ':' or whitespace";
  return undefined;
}

function parseBool(s: string): boolean | undefined {
  const l = s.toLowerCase();
  if (l === "1" || l === "true") return true;
  if (l === "0" || l === "false") return false;
  return undefined;
}

/**
 * Parses `CNI_ARGS` ("K=V;K2=V2"). Keys other than the known ones are an error unless
 * `IgnoreUnknown` is 1/true, as in the reference plugins.
 */
export function parseCniArgs(raw: string | undefined): CniArgs {
  const out: CniArgs = { ignoreUnknown: false };
  if (raw === undefined || raw === "") return out;
  const pairs: [string, string][] = [];
  for (const part of raw.split(";")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    if (eq <= 0) {
      throw badEnv(
        "CNI_ARGS",
        `has a malformed pair ${JSON.stringify(part)}`,
        'expected "KEY=VALUE;KEY2=VALUE2"',
      );
    }
    pairs.push([part.slice(0, eq), part.slice(eq + 1)]);
  }
  const ignore = pairs.find(([k]) => k === "IgnoreUnknown");
  if (ignore) {
    const b = parseBool(ignore[1]);
    if (b === undefined) {
      throw badEnv("CNI_ARGS", `has IgnoreUnknown=${ignore[1]}; it must be 1, 0, true or false`);
    }
    out.ignoreUnknown = b;
  }
  for (const [k, v] of pairs) {
    switch (k) {
      case "IgnoreUnknown":
        break;
      case "K8S_POD_NAMESPACE":
        out.podNamespace = v;
        break;
      case "K8S_POD_NAME":
        out.podName = v;
        break;
      case "K8S_POD_UID":
        out.podUid = v;
        break;
      case "K8S_POD_INFRA_CONTAINER_ID":
        out.podInfraContainerId = v;
        break;
      default:
        if (!out.ignoreUnknown) {
          throw badEnv(
            "CNI_ARGS",
            `has unknown key ${JSON.stringify(k)}`,
            "known keys: IgnoreUnknown, K8S_POD_NAMESPACE, K8S_POD_NAME, K8S_POD_UID, K8S_POD_INFRA_CONTAINER_ID; set IgnoreUnknown=1 to skip others",
          );
        }
    }
  }
  return out;
}

/** Which variables each verb requires (the spec's table). */
const REQUIRED: Record<CniCommand, readonly string[]> = {
  ADD: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"],
  CHECK: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"],
  DEL: ["CNI_CONTAINERID", "CNI_IFNAME"],
  GC: ["CNI_PATH"],
  STATUS: [],
  VERSION: [],
};

/** Reads the command alone; VERSION needs nothing else. */
export function parseCommand(get: (name: string) => string | undefined): CniCommand {
  const c = get("CNI_COMMAND");
  if (c === undefined || c === "") throw badEnv("CNI_COMMAND", "is not set");
  if (!(CNI_COMMANDS as readonly string[]).includes(c)) {
    throw badEnv("CNI_COMMAND", `is ${JSON.stringify(c)}, not one of ${CNI_COMMANDS.join(", ")}`);
  }
  return c as CniCommand;
}

/** Parses the whole environment for `command`; `get` reads a variable (Deno.env.get). */
export function parseCniEnv(
  command: CniCommand,
  get: (name: string) => string | undefined,
): CniEnv {
  for (const name of REQUIRED[command]) {
    const v = get(name);
    if (v === undefined || v === "") {
      throw badEnv(name, `is required for ${command} but is not set`);
    }
  }
  const containerId = get("CNI_CONTAINERID") || undefined;
  if (containerId !== undefined && !CONTAINER_ID_RE.test(containerId)) {
    throw badEnv(
      "CNI_CONTAINERID",
      `is ${
        JSON.stringify(containerId)
      }; it must start with a letter or digit, then letters, digits, '_', '.' or '-'`,
    );
  }
  const ifName = get("CNI_IFNAME") || undefined;
  if (ifName !== undefined) {
    const problem = ifNameProblem(ifName);
    if (problem) throw badEnv("CNI_IFNAME", `is ${JSON.stringify(ifName)}: it ${problem}`);
  }
  const netns = get("CNI_NETNS") || undefined;
  const rawPath = get("CNI_PATH") ?? "";
  return {
    command,
    containerId,
    netns,
    ifName,
    args: parseCniArgs(get("CNI_ARGS")),
    path: rawPath.split(":").filter((p) => p !== ""),
  };
}
