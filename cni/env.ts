/**
 * The CNI environment: `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME`,
 * `CNI_ARGS` and `CNI_PATH`, parsed per verb as the spec requires. A missing or malformed
 * variable is code 4 with a message that names it.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";
import { CNI_VARS } from "./process_io.ts";

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
  /**
   * The CNI_* variables as the runtime gave them (those set), handed unchanged to a
   * delegated plugin: the spec runs it with the caller's environment.
   */
  vars: Record<string, string>;
}

/** A value for a message: quoted, and cut at 64 characters. */
function shown(v: string): string {
  return JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v);
}

function badEnv(name: string, why: string, details?: string): CniError {
  return new CniError(ErrorCode.INVALID_ENV, `${name} ${why}`, details);
}

const CONTAINER_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.\-]*$/;

/**
 * Bounds on the CNI environment, checked before anything else runs (README: "Bounds").
 * Generous for every runtime seen (containerd and CRI-O ids are 64 characters, cnitool's
 * 136; Kubernetes names at most 253).
 */
export const ENV_BOUNDS = {
  /** `CNI_CONTAINERID`, in characters. */
  containerId: 256,
  /** All of `CNI_ARGS`, in bytes. */
  args: 16 * 1024,
  /** Pairs in `CNI_ARGS`. */
  argsPairs: 64,
  /** A `K8S_POD_*` value (Kubernetes names are at most 253). */
  argValue: 1024,
  /** Entries in `CNI_PATH`. */
  pathEntries: 64,
  /** All of `CNI_PATH`, in bytes. */
  path: 64 * 1024,
} as const;

/**
 * Names the kernel gives a meaning of its own: the loopback device, and the `all` and
 * `default` entries of /proc/sys/net/ipv{4,6}/conf, which a link of that name would shadow;
 * `bonding_masters` is a file in /sys/class/net once bonding is loaded.
 */
const RESERVED_IFNAMES = new Set(["lo", "all", "default", "bonding_masters"]);

/** Checks an interface name as the spec and Linux require; returns a reason or undefined. */
export function ifNameProblem(name: string): string | undefined {
  if (name === "") return "must not be empty";
  if (name === "." || name === "..") return `must not be "${name}"`;
  if (RESERVED_IFNAMES.has(name)) {
    return "is a name the kernel reserves (lo, all, default, bonding_masters)";
  }
  if (new TextEncoder().encode(name).length > 15) return "must be shorter than 16 bytes";
  if (/[/:\s]/.test(name)) return "must not contain '/', ':' or whitespace";
  // The kernel numbers a name holding '%d' itself (eth%d becomes eth0, eth1, …).
  if (name.includes("%")) return "must not contain '%' (the kernel expands '%d' in names)";
  // NUL ends a C string early; other control bytes and non-ASCII are legal to the kernel
  // but break tools that print or match names.
  if (!/^[\x21-\x7e]+$/.test(name)) return "must hold only printable ASCII characters";
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
  if (new TextEncoder().encode(raw).length > ENV_BOUNDS.args) {
    throw badEnv("CNI_ARGS", `is longer than ${ENV_BOUNDS.args} bytes`);
  }
  const parts = raw.split(";");
  if (parts.length > ENV_BOUNDS.argsPairs) {
    throw badEnv("CNI_ARGS", `has more than ${ENV_BOUNDS.argsPairs} pairs`);
  }
  const pairs: [string, string][] = [];
  for (const part of parts) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    if (eq <= 0) {
      throw badEnv(
        "CNI_ARGS",
        `has a malformed pair ${shown(part)}`,
        'expected "KEY=VALUE;KEY2=VALUE2"',
      );
    }
    const [k, v] = [part.slice(0, eq), part.slice(eq + 1)];
    if (k.startsWith("K8S_") && v.length > ENV_BOUNDS.argValue) {
      throw badEnv("CNI_ARGS", `has a ${k} longer than ${ENV_BOUNDS.argValue} characters`);
    }
    // deno-lint-ignore no-control-regex
    if (/[\x00-\x1f\x7f]/.test(v)) {
      throw badEnv("CNI_ARGS", `has a control character in the value of ${JSON.stringify(k)}`);
    }
    pairs.push([k, v]);
  }
  const ignore = pairs.find(([k]) => k === "IgnoreUnknown");
  if (ignore) {
    const b = parseBool(ignore[1]);
    if (b === undefined) {
      throw badEnv(
        "CNI_ARGS",
        `has IgnoreUnknown=${ignore[1].slice(0, 64)}; it must be 1, 0, true or false`,
      );
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
            `has unknown key ${shown(k)}`,
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
    throw badEnv("CNI_COMMAND", `is ${shown(c)}, not one of ${CNI_COMMANDS.join(", ")}`);
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
  if (containerId !== undefined && containerId.length > ENV_BOUNDS.containerId) {
    throw badEnv(
      "CNI_CONTAINERID",
      `is ${containerId.length} characters long; at most ${ENV_BOUNDS.containerId} are accepted`,
    );
  }
  if (containerId !== undefined && !CONTAINER_ID_RE.test(containerId)) {
    throw badEnv(
      "CNI_CONTAINERID",
      `is ${
        shown(containerId)
      }; it must start with a letter or digit, then letters, digits, '_', '.' or '-'`,
    );
  }
  const ifName = get("CNI_IFNAME") || undefined;
  if (ifName !== undefined) {
    const problem = ifNameProblem(ifName);
    if (problem) throw badEnv("CNI_IFNAME", `is ${shown(ifName)}: it ${problem}`);
  }
  const netns = get("CNI_NETNS") || undefined;
  const rawPath = get("CNI_PATH") ?? "";
  if (new TextEncoder().encode(rawPath).length > ENV_BOUNDS.path) {
    throw badEnv("CNI_PATH", `is longer than ${ENV_BOUNDS.path} bytes`);
  }
  const path = rawPath.split(":").filter((p) => p !== "");
  if (path.length > ENV_BOUNDS.pathEntries) {
    throw badEnv("CNI_PATH", `has ${path.length} entries; at most ${ENV_BOUNDS.pathEntries}`);
  }
  if (rawPath.includes("\0")) throw badEnv("CNI_PATH", "contains a NUL character");
  return {
    command,
    containerId,
    netns,
    ifName,
    args: parseCniArgs(get("CNI_ARGS")),
    path,
    vars: Object.fromEntries(
      CNI_VARS.flatMap((name) => {
        const v = get(name);
        return v === undefined ? [] : [[name, v]];
      }),
    ),
  };
}
