/**
 * The daemon's configuration: a YAML or JSON file, then environment variables, then flags
 * (later wins), parsed with zod. Every knob has a default here and a doc line in
 * {@linkcode KNOBS} (ipam/knobs.ts). A bad knob is named in the error and the daemon refuses
 * to start.
 *
 * @module
 */
import { z } from "zod";
import { parse as parseYaml } from "yaml";
import { parseSelector, SelectorSyntaxError, type TagSelector } from "./selector.ts";
import { DEFAULT_IPAM_SOCKET } from "../proto/ipam.ts";
import { KNOBS } from "./knobs.ts";
import { parseIpv4Cidr } from "../base/ipv4.ts";
import { DEFAULT_DEVICE_PLUGIN_DIR, DEFAULT_POD_RESOURCES_SOCKET } from "./kubelet/defaults.ts";

const selectorText = z.string().superRefine((text, ctx) => {
  try {
    parseSelector(text);
  } catch (e) {
    ctx.addIssue({
      code: "custom",
      message: e instanceof SelectorSyntaxError ? e.message : String(e),
    });
  }
});

const subnetSelectorSchema = z.union([
  z.literal("node"),
  z.object({ ids: z.array(z.string().regex(/^subnet-[0-9a-f]+$/)).min(1) }).strict(),
  z.object({ tags: selectorText }).strict(),
]);

const sgSelectorSchema = z.union([
  z.literal("primary"),
  z.object({ ids: z.array(z.string().regex(/^sg-[0-9a-f]+$/)).min(1).max(5) }).strict(),
  z.object({ tags: selectorText }).strict(),
]);

const count = z.int().nonnegative();

/** The longest `pools[].ipCooldownSeconds` (and checkpoint cooldown) the daemon accepts: 1 h. */
export const MAX_COOLDOWN_SECONDS = 3600;

/**
 * How many route tables from `routeTableBase` up the daemon may hand out: one per ENI device
 * index 0…63. Every instance type today has at most 24 ENIs (aws/limits_table.ts); the span
 * leaves room for larger ones, and the start refuses an instance with more.
 */
export const ROUTE_TABLE_SPAN = 64;

/** Route tables the kernel reserves: a pod's ENI table must be none of them. */
export const RESERVED_TABLES: ReadonlyMap<number, string> = new Map([
  [0, "unspec"],
  [253, "default"],
  [254, "main"],
  [255, "local"],
]);

/** The highest `routeTableBase` accepted: the span stays below 2^31. */
export const MAX_ROUTE_TABLE_BASE = 0x7fffffff - ROUTE_TABLE_SPAN + 1;

/** The ranges `routeTableBase` may take, as the README and the errors state them. */
export const ROUTE_TABLE_BASE_RANGES = `1–${
  252 - ROUTE_TABLE_SPAN + 1
} or 256–${MAX_ROUTE_TABLE_BASE}`;

/**
 * Why `base` cannot be `routeTableBase`, or undefined when it can: the tables
 * base…base+{@linkcode ROUTE_TABLE_SPAN}-1 must miss the reserved ones.
 */
export function routeTableBaseProblem(base: number): string | undefined {
  const hits: string[] = [];
  for (const [table, name] of RESERVED_TABLES) {
    const d = table - base;
    if (d >= 0 && d < ROUTE_TABLE_SPAN) {
      hits.push(`device index ${d} would use table ${table} (${name})`);
    }
  }
  if (hits.length === 0 && base >= 1 && base <= MAX_ROUTE_TABLE_BASE) return undefined;
  const why = hits.length
    ? hits.join(", ")
    : `tables ${base}…${base + ROUTE_TABLE_SPAN - 1} leave the kernel's range`;
  return `${base} is unusable: ${why}. ENI device index d uses table routeTableBase + d ` +
    `(d = 0…${ROUTE_TABLE_SPAN - 1}), and tables 0, 253 (default), 254 (main) and 255 (local) ` +
    `are the kernel's; use ${ROUTE_TABLE_BASE_RANGES}, e.g. 100 (the default) or 256`;
}
/** A pool's egress knobs (ipam/egress): SNAT to the node's address beyond the VPC. */
const poolEgressFields = {
  snat: z.enum(["node", "none"]).optional(),
  snatExcludeCidrs: z.array(
    z.string().refine((t) => parseIpv4Cidr(t) !== undefined, "must be an IPv4 CIDR (a.b.c.d/len)"),
  ).default([]),
  snatRandomFully: z.boolean().default(true),
};

const poolSchema = z.object({
  name: z.string().regex(
    /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    "must be a DNS label (lower-case letters, digits, '-')",
  ),
  subnets: subnetSelectorSchema.default("node"),
  securityGroups: sgSelectorSchema.default("primary"),
  minimumIps: count.default(0),
  warmIps: count.default(0),
  warmEnis: count.default(1),
  prefixDelegation: z.boolean().default(false),
  maxEnis: z.int().positive().optional(),
  firstInterfaceIndex: count.default(0),
  allowSharedSubnets: z.boolean().default(true),
  ipCooldownSeconds: count.max(MAX_COOLDOWN_SECONDS).default(30),
  ...poolEgressFields,
}).strict();

const loopbackListen = z.string().superRefine((s, ctx) => {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(s);
  if (!m) {
    ctx.addIssue({ code: "custom", message: `expected host:port, got "${s}"` });
    return;
  }
  const host = m[1].replace(/^\[|\]$/g, "");
  if (!/^127\.\d+\.\d+\.\d+$/.test(host) && host !== "::1" && host !== "localhost") {
    ctx.addIssue({
      code: "custom",
      message: `must be a loopback address (127.0.0.0/8 or ::1), got "${host}"`,
    });
  }
  if (Number(m[2]) > 65535) ctx.addIssue({ code: "custom", message: "port out of range" });
});

const urlText = z.url({ protocol: /^https?$/ });

/** The schema of the whole configuration, defaults included. */
export const configSchema = z.object({
  clusterName: z.string().min(1).max(128).default("vpcni"),
  datapath: z.enum(["ipvlan-l2", "ipvlan-l3s", "veth"]).default("ipvlan-l2"),
  socketPath: z.string().startsWith("/").default(DEFAULT_IPAM_SOCKET),
  stateDir: z.string().startsWith("/").default("/var/lib/vpcni"),
  listen: loopbackListen.default("127.0.0.1:61679"),
  region: z.string().optional(),
  ec2Endpoint: urlText.optional(),
  imdsEndpoint: urlText.optional(),
  logLevel: z.enum(["debug", "info", "warning", "error"]).default("info"),
  addTimeoutSeconds: z.number().positive().max(300).default(20),
  reconcileIntervalSeconds: z.number().min(0.05).max(300).default(5),
  releaseDelaySeconds: z.number().nonnegative().max(86_400).default(60),
  leakedEniGraceSeconds: z.number().nonnegative().max(604_800).default(300),
  imdsCheckSeconds: z.number().positive().max(3600).default(60),
  ec2ResyncSeconds: z.number().positive().max(86_400).default(600),
  startJitterSeconds: z.number().nonnegative().max(3600).default(120),
  routeTableBase: z.int().superRefine((base, ctx) => {
    const problem = routeTableBaseProblem(base);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  }).default(100),
  defaultPool: z.string().optional(),
  // Pool capacity advertised to the kubelet (ipam/kubelet/): see KNOBS.
  devicePlugin: z.enum(["auto", "on", "off"]).default("auto"),
  devicePluginDir: z.string().startsWith("/").default(DEFAULT_DEVICE_PLUGIN_DIR),
  podResourcesSocket: z.string().startsWith("/").default(DEFAULT_POD_RESOURCES_SOCKET),
  // The netns pods are wired from, when the daemon runs outside it (ipam/cni_service.ts).
  nodeNetns: z.string().startsWith("/").optional(),
  cniWorkerIdleSeconds: z.number().nonnegative().max(86_400).default(0),
  pools: z.array(poolSchema).min(1).default([{
    name: "default",
    subnets: "node",
    securityGroups: "primary",
    minimumIps: 0,
    warmIps: 0,
    warmEnis: 1,
    prefixDelegation: false,
    firstInterfaceIndex: 0,
    allowSharedSubnets: true,
    ipCooldownSeconds: 30,
    snatExcludeCidrs: [],
    snatRandomFully: true,
  }]),
}).strict().superRefine((c, ctx) => {
  const seen = new Set<string>();
  c.pools.forEach((p, i) => {
    if (seen.has(p.name)) {
      ctx.addIssue({
        code: "custom",
        path: ["pools", i, "name"],
        message: `duplicate pool name "${p.name}"`,
      });
    }
    seen.add(p.name);
    if (p.prefixDelegation && p.warmEnis === 0 && p.warmIps === 0 && p.minimumIps === 0) {
      // allowed: a pool that only grows on demand
    }
  });
  c.pools.forEach((p, i) => {
    if (c.datapath === "ipvlan-l2" && p.snat === "node") {
      ctx.addIssue({
        code: "custom",
        path: ["pools", i, "snat"],
        message: "ipvlan-l2 pods' traffic never reaches the host's netfilter, so the host " +
          "cannot SNAT it: use datapath ipvlan-l3s or veth, or snat: none with a NAT gateway",
      });
    }
  });
  if (c.defaultPool !== undefined && !seen.has(c.defaultPool)) {
    ctx.addIssue({
      code: "custom",
      path: ["defaultPool"],
      message: `no pool named "${c.defaultPool}" (pools: ${[...seen].join(", ")})`,
    });
  }
});

/** The parsed, defaulted configuration. */
export type DaemonConfig = z.infer<typeof configSchema>;
/** One parsed pool. */
export type PoolConfig = DaemonConfig["pools"][number];

/** A configuration that cannot be used; `problems` names each bad knob. */
export class ConfigError extends Error {
  /** One line per bad knob, each starting with the knob's path (or the flag that set it). */
  readonly problems: string[];
  /** True when the problems are knobs (as opposed to a file that cannot be read or parsed). */
  readonly knobs: boolean;
  /**
   * Builds the error from its problem lines and the source it came from; with `source`
   * undefined, the single problem is a file-level one and is the whole message.
   */
  constructor(source: string | undefined, problems: string[]) {
    super(
      source === undefined
        ? problems.join("; ")
        : `invalid configuration (${source}):\n  ${problems.join("\n  ")}`,
    );
    this.name = "ConfigError";
    this.problems = problems;
    this.knobs = source !== undefined;
  }

  /** A file-level problem told in one line (`file:line:col: message`, `--config x: …`). */
  static file(line: string): ConfigError {
    return new ConfigError(undefined, [line]);
  }
}

/** Overrides from the command line; undefined means "not given". */
export interface ConfigOverrides {
  clusterName?: string;
  datapath?: string;
  socketPath?: string;
  stateDir?: string;
  listen?: string;
  region?: string;
  ec2Endpoint?: string;
  imdsEndpoint?: string;
  logLevel?: string;
  devicePlugin?: string;
  devicePluginDir?: string;
  podResourcesSocket?: string;
  nodeNetns?: string;
}

/** Each knob an environment variable sets, with that variable: from the knob table. */
const ENV_KEYS: [string, string][] = KNOBS.flatMap((k) => k.env ? [[k.knob, k.env]] : []);

/**
 * Reads a config file's text as YAML (a superset of JSON); `null` when it holds no document
 * (empty, or comments only). A syntax error is one line, `file:line:col: message`, like a
 * compiler's.
 */
export function parseConfigText(text: string, source: string): unknown {
  try {
    return parseYaml(text) ?? null;
  } catch (e) {
    const err = e as Error & { linePos?: { line: number; col: number }[] };
    // The yaml library appends " at line L, column C:" and a multi-line excerpt.
    const message = err.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "");
    const pos = err.linePos?.[0];
    const where = pos ? `${source}:${pos.line}:${pos.col}` : source;
    throw ConfigError.file(`${where}: not valid YAML/JSON: ${message}`);
  }
}

/** Where a top-level knob's value came from, when not from the file. */
type Origin = { kind: "flag" | "env"; name: string };

/** The value at `path` inside `root`, if any. */
function valueAt(root: unknown, path: PropertyKey[]): unknown {
  let v = root;
  for (const k of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

/** A value as a message quotes it: strings in quotes, others by kind and value. */
function shown(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (v === null || v === undefined) return String(v);
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object") return "a mapping";
  return String(v);
}

const TYPE_NAMES: Record<string, string> = {
  int: "a whole number",
  number: "a number",
  string: "a string",
  boolean: "true or false",
  array: "a list",
  object: "a mapping",
};

/** One zod issue in words a user reads: what the knob must be, and what it got. */
function issueMessage(i: z.core.$ZodIssue, value: unknown): string {
  const got = `; got ${shown(value)}`;
  switch (i.code) {
    case "invalid_value":
      return `must be one of ${i.values.map(String).join(", ")}${got}`;
    case "invalid_type":
      if (value === undefined) return "is required";
      return `must be ${TYPE_NAMES[i.expected] ?? i.expected}${got}`;
    case "too_small":
      if (i.origin === "string") {
        return Number(i.minimum) <= 1
          ? `must not be empty`
          : `needs at least ${i.minimum} characters`;
      }
      if (i.origin === "array") return `needs at least ${i.minimum} entries`;
      return `must be ${i.inclusive ? "at least" : "greater than"} ${i.minimum}${got}`;
    case "too_big":
      if (i.origin === "string") return `must be at most ${i.maximum} characters`;
      if (i.origin === "array") return `takes at most ${i.maximum} entries`;
      return `must be ${i.inclusive ? "at most" : "less than"} ${i.maximum}${got}`;
    case "invalid_format":
      if (i.format === "starts_with") {
        const prefix = (i as { prefix?: string }).prefix ?? "/";
        return `must be an absolute path (start with "${prefix}")${got}`;
      }
      if (i.format === "url") return `must be an http:// or https:// URL${got}`;
      if (i.format === "regex" && !i.message.startsWith("Invalid")) return `${i.message}${got}`;
      return `has the wrong form${got}`;
    case "unrecognized_keys":
      return `unknown knob(s): ${i.keys.join(", ")}`;
    case "invalid_union":
      return `${i.message.replace(/^Invalid input$/, "not one of the accepted forms")}${got}`;
    default:
      return i.message;
  }
}

/**
 * Formats zod issues as `name: message` lines. The name is the flag when a flag set the
 * knob (the user typed `--log-level`, not `logLevel`), else the knob's path.
 */
function issueLines(
  err: z.ZodError,
  merged: Record<string, unknown>,
  origins: Map<string, Origin>,
): string[] {
  return err.issues.map((i) => {
    const origin = typeof i.path[0] === "string" ? origins.get(i.path[0]) : undefined;
    const path = i.path.map((p) => typeof p === "number" ? `[${p}]` : `.${String(p)}`)
      .join("").replace(/^\./, "");
    const name = origin?.kind === "flag" ? origin.name : path || "(top level)";
    const from = origin?.kind === "env" ? ` (from ${origin.name})` : "";
    return `${name}: ${issueMessage(i, valueAt(merged, i.path))}${from}`;
  });
}

/**
 * Builds the effective configuration from a file's parsed content, the environment and
 * flags. Throws {@linkcode ConfigError} listing every bad knob.
 */
export function resolveConfig(
  fileContent: unknown,
  env: Record<string, string | undefined>,
  flags: ConfigOverrides,
  source = "configuration",
): DaemonConfig {
  if (fileContent === null || typeof fileContent !== "object" || Array.isArray(fileContent)) {
    throw new ConfigError(source, ["(top level): expected a mapping of knobs"]);
  }
  const merged: Record<string, unknown> = { ...fileContent as Record<string, unknown> };
  const origins = new Map<string, Origin>();
  for (const [key, name] of ENV_KEYS) {
    const v = env[name];
    if (v !== undefined && v !== "") {
      merged[key] = v;
      origins.set(key, { kind: "env", name });
    }
  }
  for (const [key, v] of Object.entries(flags)) {
    if (v === undefined) continue;
    merged[key] = v;
    const flag = KNOBS.find((k) => k.knob === key)?.flag;
    if (flag) origins.set(key, { kind: "flag", name: flag });
  }
  const r = configSchema.safeParse(merged);
  if (!r.success) throw new ConfigError(source, issueLines(r.error, merged, origins));
  return r.data;
}

/** Loads and resolves the configuration from an optional file path. */
export async function loadConfig(
  path: string | undefined,
  env: Record<string, string | undefined>,
  flags: ConfigOverrides,
): Promise<DaemonConfig> {
  let content: unknown = {};
  if (path !== undefined) {
    let text: string;
    try {
      // Reading a FIFO would block for ever: only a regular file (or a directory, refused
      // below by its read) is opened.
      const info = await Deno.stat(path);
      if (!info.isFile && !info.isDirectory) {
        throw ConfigError.file(
          `--config ${path}: not a regular file (a FIFO, socket or device); give a YAML or ` +
            `JSON file`,
        );
      }
      text = await Deno.readTextFile(path);
    } catch (e) {
      if (e instanceof ConfigError) throw e;
      throw ConfigError.file(`--config ${path}: ${unreadableReason(e)}`);
    }
    content = parseConfigText(text, path);
    if (content === null) {
      throw ConfigError.file(
        `--config ${path}: ${
          text.trim() === "" ? "is empty" : "holds only comments"
        }, no knobs; write the knobs to set (e.g. "pools: [{name: default}]"), or leave ` +
          `--config out to run on defaults`,
      );
    }
  }
  return resolveConfig(content, env, flags, path ?? "defaults, environment and flags");
}

/** Why a config file cannot be read, and what to do, in a few words. */
function unreadableReason(e: unknown): string {
  if (e instanceof Deno.errors.NotFound) return "no such file; check the path";
  if (e instanceof Deno.errors.PermissionDenied) {
    return "permission denied; make it readable by the user the daemon runs as";
  }
  if (e instanceof Deno.errors.IsADirectory) {
    return "is a directory; give the path of a YAML or JSON file";
  }
  if (e instanceof TypeError || e instanceof Deno.errors.InvalidData) {
    return "not UTF-8 text; give a YAML or JSON file";
  }
  return (e as Error).message.replace(/:? ?(readfile|open) '.*'$/, "");
}

/** The default pool's name. */
export function defaultPoolName(c: DaemonConfig): string {
  return c.defaultPool ?? c.pools[0].name;
}

/** A pool's subnet selector as a parsed object. */
export type SubnetChoice =
  | { kind: "node" }
  | { kind: "ids"; ids: string[] }
  | { kind: "tags"; selector: TagSelector };

/** Parses a pool's `subnets` knob (already validated). */
export function subnetChoice(p: PoolConfig): SubnetChoice {
  if (p.subnets === "node") return { kind: "node" };
  if ("ids" in p.subnets) return { kind: "ids", ids: p.subnets.ids };
  return { kind: "tags", selector: parseSelector(p.subnets.tags) };
}

/** Parses a subnet selector given in a pod annotation (`vpcni.io/subnet-selector`). */
export function annotationSubnetChoice(text: string): SubnetChoice {
  const t = text.trim();
  if (t === "node") return { kind: "node" };
  if (/^subnet-[0-9a-f]+(\s*,\s*subnet-[0-9a-f]+)*$/.test(t)) {
    return { kind: "ids", ids: t.split(/\s*,\s*/) };
  }
  return { kind: "tags", selector: parseSelector(t) };
}

/**
 * Whether a pool's pods are SNATed beyond the VPC: `snat` as set, else `node` — the AWS VPC
 * CNI's default, since a pod on a secondary address reaches nothing outside the VPC without
 * it — except on ipvlan-l2, whose pods' traffic the host never sees.
 */
export function poolSnat(cfg: Pick<DaemonConfig, "datapath">, p: PoolConfig): "node" | "none" {
  return p.snat ?? (cfg.datapath === "ipvlan-l2" ? "none" : "node");
}
