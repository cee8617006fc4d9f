/**
 * The network configuration vpcni receives on stdin, parsed into typed settings. vpcni is
 * either the main plugin (`type: "vpcni"`) or the IPAM plugin of another main plugin
 * (`ipam.type: "vpcni"`, e.g. under the reference `ptp` or `ipvlan`). Checks run in the
 * spec's order: JSON (code 6), then `cniVersion` (code 1), then fields (codes 7 and 2).
 *
 * @module
 */
import {
  DEFAULT_ADD_TIMEOUT_MS,
  DEFAULT_DAEMON_TIMEOUT_MS,
  DEFAULT_IPAM_SOCKET,
  MAX_DAEMON_TIMEOUT_MS,
} from "../proto/ipam.ts";
import { DATAPATH_KINDS, type DatapathKind } from "./datapath/types.ts";
import { CniError, ErrorCode } from "./errors.ts";
import {
  anyValue,
  arr,
  bool,
  invalid,
  ipv4,
  ipv4Cidr,
  num,
  obj,
  oneOf,
  optional,
  plainObject,
  record,
  str,
  withDefault,
} from "../proto/schema.ts";
import { type CniResult, parseDns, parseResult, type ResultDns } from "./result.ts";
import { requireSupportedVersion } from "./versions.ts";
import { checkConfigBounds, checkSocketPath } from "./bounds.ts";

/** The capability through which containerd and CRI-O pass pod annotations. */
export const POD_ANNOTATIONS_CAPABILITY = "io.kubernetes.cri.pod-annotations";

/** Capabilities vpcni can be given in `capabilities`. */
export const SUPPORTED_CAPABILITIES: readonly string[] = [POD_ANNOTATIONS_CAPABILITY];

/** Log levels, most severe first. */
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;

/** One of {@linkcode LOG_LEVELS}. */
export type LogLevel = typeof LOG_LEVELS[number];

/** Defaults of the optional fields (the README's configuration table lists them). */
export const CONFIG_DEFAULTS = {
  datapath: "ipvlan-l2" as DatapathKind,
  mtu: 9001,
  hostVethPrefix: "vpc",
  daemonSocket: DEFAULT_IPAM_SOCKET,
  logLevel: "warn" as LogLevel,
};

/** An attachment the runtime still considers valid (GC input). */
export interface ValidAttachment {
  containerId: string;
  ifName: string;
}

/** Where vpcni sends logs. */
export interface LogSettings {
  logFile?: string;
  logLevel: LogLevel;
}

/** How vpcni reaches the IPAM daemon. */
export interface DaemonSettings {
  socket: string;
  /** Bound on a round trip of every verb but ADD. */
  timeoutMs: number;
  /** Bound on an ADD's round trip, which may wait for the pool to grow. */
  addTimeoutMs: number;
}

/**
 * The daemon settings from a configured socket and bound: a configured `daemonTimeoutMs`
 * bounds every verb; unset, ADD gets {@linkcode DEFAULT_ADD_TIMEOUT_MS}, the rest
 * {@linkcode DEFAULT_DAEMON_TIMEOUT_MS}.
 */
export function daemonSettings(socket: string, configuredTimeoutMs?: number): DaemonSettings {
  return configuredTimeoutMs === undefined
    ? { socket, timeoutMs: DEFAULT_DAEMON_TIMEOUT_MS, addTimeoutMs: DEFAULT_ADD_TIMEOUT_MS }
    : { socket, timeoutMs: configuredTimeoutMs, addTimeoutMs: configuredTimeoutMs };
}

/** Settings common to both roles (runtime-provided fields). */
export interface RuntimeFields {
  cniVersion: string;
  name: string;
  /** `prevResult`, converted to the version-neutral model. */
  prevResult?: CniResult;
  /** Pod annotations from the `io.kubernetes.cri.pod-annotations` capability. */
  annotations?: Record<string, string>;
  /** GC's `cni.dev/valid-attachments` (`null` reads as []); absent means no list was sent. */
  validAttachments?: ValidAttachment[];
}

/** vpcni as the main plugin. */
export interface MainPluginConfig extends RuntimeFields, LogSettings {
  role: "main";
  datapath: DatapathKind;
  mtu: number;
  serviceCidrs: string[];
  nodeIps: string[];
  hostVethPrefix: string;
  daemon: DaemonSettings;
  /** Present when addresses come from a standard IPAM plugin instead of the daemon. */
  delegateIpam?: { type: string };
  dns?: ResultDns;
}

/** vpcni as the IPAM plugin of another main plugin. */
export interface IpamPluginConfig extends RuntimeFields, LogSettings {
  role: "ipam";
  daemon: DaemonSettings;
  /** Routes to return; default: a default route via the subnet gateway. */
  routes?: { dst: string; gw?: string }[];
}

/** A parsed configuration in either role. */
export type PluginConfig = MainPluginConfig | IpamPluginConfig;

const validAttachmentsParser = arr(obj({
  containerID: str({ nonEmpty: true }),
  ifname: str({ nonEmpty: true }),
}));

const runtimeConfigParser = obj({
  [POD_ANNOTATIONS_CAPABILITY]: optional(record(str())),
});

const absolutePath = str({ pattern: /^\//, hint: "an absolute path" });

const mainShape = {
  cniVersion: anyValue,
  cniVersions: optional(arr(str())),
  name: anyValue,
  type: anyValue,
  datapath: withDefault(oneOf(DATAPATH_KINDS), CONFIG_DEFAULTS.datapath),
  mtu: withDefault(num({ int: true, min: 576, max: 9001 }), CONFIG_DEFAULTS.mtu),
  serviceCidrs: withDefault(arr(ipv4Cidr), [] as string[]),
  nodeIps: withDefault(arr(ipv4), [] as string[]),
  hostVethPrefix: withDefault(
    str({ pattern: /^[a-z0-9]{1,4}$/, hint: "1 to 4 lower-case letters or digits" }),
    CONFIG_DEFAULTS.hostVethPrefix,
  ),
  daemonSocket: withDefault(absolutePath, CONFIG_DEFAULTS.daemonSocket),
  // Unset, each verb gets its own default bound (daemonSettings).
  daemonTimeoutMs: optional(num({ int: true, min: 100, max: MAX_DAEMON_TIMEOUT_MS })),
  logFile: optional(absolutePath),
  logLevel: withDefault(oneOf(LOG_LEVELS), CONFIG_DEFAULTS.logLevel),
  ipam: optional(plainObject),
  dns: optional(parseDns),
  ipMasq: optional(bool),
  capabilities: optional(record(bool)),
  args: anyValue,
  runtimeConfig: anyValue,
  prevResult: anyValue,
  "cni.dev/valid-attachments": anyValue,
  "cni.dev/attachments": anyValue,
};

const ipamShape = {
  type: anyValue,
  daemonSocket: withDefault(absolutePath, CONFIG_DEFAULTS.daemonSocket),
  // Unset, each verb gets its own default bound (daemonSettings).
  daemonTimeoutMs: optional(num({ int: true, min: 100, max: MAX_DAEMON_TIMEOUT_MS })),
  routes: optional(arr(obj({ dst: ipv4Cidr, gw: optional(ipv4) }, { unknown: "reject" }))),
  logFile: optional(absolutePath),
  logLevel: withDefault(oneOf(LOG_LEVELS), CONFIG_DEFAULTS.logLevel),
};

/** Decodes stdin bytes as a JSON object; code 6 when it is not one. */
export function decodeStdin(text: string): Record<string, unknown> {
  if (text.trim() === "") {
    throw new CniError(
      ErrorCode.DECODE_FAILURE,
      "failed to decode the network configuration on stdin: not JSON (stdin is empty)",
      "the runtime passes the network configuration on stdin; by hand, pipe it in: " +
        "CNI_COMMAND=ADD … vpcni < net.conf",
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new CniError(
      ErrorCode.DECODE_FAILURE,
      "failed to decode the network configuration on stdin: not JSON",
      (e as Error).message,
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new CniError(
      ErrorCode.DECODE_FAILURE,
      "failed to decode the network configuration on stdin: not a JSON object",
    );
  }
  return value as Record<string, unknown>;
}

/** Reads and checks `cniVersion` (code 7 when absent, code 1 when not spoken). */
export function configVersion(raw: Record<string, unknown>): string {
  const v = raw.cniVersion;
  if (v === undefined || v === null || v === "") {
    throw invalid("cniVersion", "is required");
  }
  if (typeof v !== "string") throw invalid("cniVersion", "must be a string");
  return requireSupportedVersion(v, "cniVersion");
}

function runtimeFields(raw: Record<string, unknown>, cniVersion: string): RuntimeFields {
  const name = str({
    pattern: /^[A-Za-z0-9][A-Za-z0-9_.\-]*$/,
    hint: "a network name (letters, digits, '_', '.', '-')",
  })(raw.name, "name");
  const out: RuntimeFields = { cniVersion, name };
  if (raw.prevResult !== undefined && raw.prevResult !== null) {
    out.prevResult = parseResult(raw.prevResult, "prevResult").result;
  }
  if (raw.runtimeConfig !== undefined && raw.runtimeConfig !== null) {
    const rc = runtimeConfigParser(raw.runtimeConfig, "runtimeConfig");
    out.annotations = rc[POD_ANNOTATIONS_CAPABILITY];
  }
  // libcni sets both keys (an earlier spec text used the second); either may come alone.
  // libcni encodes "no attachment is valid" as null; an absent key is no list at all.
  const key = "cni.dev/valid-attachments" in raw
    ? "cni.dev/valid-attachments"
    : "cni.dev/attachments";
  const valid = raw[key];
  if (valid === null) out.validAttachments = [];
  else if (valid !== undefined) {
    out.validAttachments = validAttachmentsParser(valid, key).map((a) => ({
      containerId: a.containerID,
      ifName: a.ifname,
    }));
  }
  return out;
}

function parseMain(raw: Record<string, unknown>, cniVersion: string): MainPluginConfig {
  const c = obj(mainShape, { unknown: "reject" })(raw, "");
  if (c.ipMasq === true) {
    throw new CniError(
      ErrorCode.UNSUPPORTED_FIELD,
      "unsupported field ipMasq=true",
      "pods keep their VPC address end to end; vpcni never masquerades (remove ipMasq)",
    );
  }
  for (const [cap, on] of Object.entries(c.capabilities ?? {})) {
    if (on && !SUPPORTED_CAPABILITIES.includes(cap)) {
      throw new CniError(
        ErrorCode.UNSUPPORTED_FIELD,
        `unsupported field capabilities.${cap}=true`,
        `vpcni supports the capabilities ${SUPPORTED_CAPABILITIES.join(", ")}`,
      );
    }
  }
  const base = runtimeFields(raw, cniVersion);
  const out: MainPluginConfig = {
    ...base,
    role: "main",
    datapath: c.datapath,
    mtu: c.mtu,
    serviceCidrs: c.serviceCidrs,
    nodeIps: c.nodeIps,
    hostVethPrefix: c.hostVethPrefix,
    daemon: daemonSettings(c.daemonSocket, c.daemonTimeoutMs),
    logFile: c.logFile,
    logLevel: c.logLevel,
    dns: c.dns,
  };
  checkSocketPath(out.daemon.socket, "daemonSocket");
  if (c.ipam !== undefined) {
    const type = str({ nonEmpty: true, pattern: /^[A-Za-z0-9_.\-]+$/, hint: "a plugin name" })(
      c.ipam.type,
      "ipam.type",
    );
    if (type === "vpcni") {
      // The daemon serves the main plugin directly; the ipam section may tune the socket.
      const i = obj(ipamShape, { unknown: "reject" })(c.ipam, "ipam");
      const socket = c.ipam.daemonSocket !== undefined ? i.daemonSocket : out.daemon.socket;
      out.daemon = i.daemonTimeoutMs !== undefined
        ? daemonSettings(socket, i.daemonTimeoutMs)
        : { ...out.daemon, socket };
      if (c.ipam.daemonSocket !== undefined) checkSocketPath(i.daemonSocket, "ipam.daemonSocket");
    } else {
      out.delegateIpam = { type };
    }
  }
  return out;
}

function parseIpamRole(raw: Record<string, unknown>, cniVersion: string): IpamPluginConfig {
  // The top level belongs to the main plugin (ptp, ipvlan, …): only `ipam` is ours.
  const ipam = plainObject(raw.ipam, "ipam");
  const i = obj(ipamShape, { unknown: "reject" })(ipam, "ipam");
  checkSocketPath(i.daemonSocket, "ipam.daemonSocket");
  return {
    ...runtimeFields(raw, cniVersion),
    role: "ipam",
    daemon: daemonSettings(i.daemonSocket, i.daemonTimeoutMs),
    routes: i.routes?.map((r) => (r.gw === undefined ? { dst: r.dst } : { dst: r.dst, gw: r.gw })),
    logFile: i.logFile,
    logLevel: i.logLevel,
  };
}

/**
 * Parses a decoded network configuration. The role follows from `type` and `ipam.type`:
 * `type: "vpcni"` is the main plugin; otherwise `ipam.type: "vpcni"` is the IPAM plugin.
 */
export function parseConfig(raw: Record<string, unknown>): PluginConfig {
  const cniVersion = configVersion(raw);
  const type = str({ nonEmpty: true })(raw.type, "type");
  if (type === "vpcni") {
    checkConfigBounds(raw, true);
    return parseMain(raw, cniVersion);
  }
  const ipam = raw.ipam;
  if (typeof ipam === "object" && ipam !== null && (ipam as { type?: unknown }).type === "vpcni") {
    checkConfigBounds(raw, false);
    return parseIpamRole(raw, cniVersion);
  }
  throw invalid(
    "type",
    `is ${JSON.stringify(type)}: vpcni runs as type "vpcni" or as ipam.type "vpcni"`,
  );
}
