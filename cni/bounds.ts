/**
 * Bounds on the network configuration, checked on the decoded JSON before any field is
 * parsed and long before the kernel or the daemon hears of the request: a runtime's cache
 * or a hostile caller must not make the plugin walk 100,000 prevResult addresses (and
 * leave rules behind when the walk fails half-way), nor ship megabytes of annotations to
 * the daemon. Every bound is far above what a pod uses and is listed in cni/README.md.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";
import { invalid } from "./schema.ts";

/** The bounds (README: "Bounds on input"). */
export const INPUT_BOUNDS = {
  /** stdin, in bytes. */
  stdinBytes: 1024 * 1024,
  /** `name`, in characters. */
  name: 256,
  /** `prevResult.ips` and `prevResult.interfaces`, entries each. */
  prevResultIps: 64,
  /** `prevResult.interfaces`. */
  prevResultInterfaces: 64,
  /** `prevResult.routes`, and the IPAM role's `routes`. */
  routes: 256,
  /** Each of `dns.nameservers`, `dns.search`, `dns.options` (config and prevResult). */
  dnsEntries: 32,
  /** `serviceCidrs` and `nodeIps`, entries each. */
  cidrs: 64,
  /** Pod annotations: how many. */
  annotations: 512,
  /** Pod annotations: keys and values together, in characters (Kubernetes' own limit). */
  annotationChars: 256 * 1024,
  /** A `vpcni.io/…` annotation's value, which the daemon parses, in characters. */
  vpcniAnnotation: 4096,
  /** `cni.dev/valid-attachments` (GC), entries. */
  validAttachments: 16384,
  /** Any other string field of the configuration (paths, names, DNS entries), characters. */
  string: 4096,
  /** `daemonSocket`, in bytes: a unix socket address holds at most 107. */
  socketPath: 107,
  /** `capabilities` keys. */
  capabilities: 64,
} as const;

/** Refuses stdin larger than {@linkcode INPUT_BOUNDS.stdinBytes}, before it is decoded. */
export function checkStdinSize(bytes: number): void {
  if (bytes > INPUT_BOUNDS.stdinBytes) {
    throw new CniError(
      ErrorCode.INVALID_CONFIG,
      `invalid network configuration: stdin holds more than ${INPUT_BOUNDS.stdinBytes} bytes`,
      "vpcni reads at most 1 MiB of network configuration; a prevResult or annotations " +
        "that large are not a pod's (see the bounds in vpcni's CNI README)",
    );
  }
}

function tooMany(path: string, n: number, max: number): CniError {
  return invalid(path, `has ${n} entries; at most ${max} are accepted`);
}

function atMost(value: unknown, path: string, max: number): void {
  if (Array.isArray(value) && value.length > max) throw tooMany(path, value.length, max);
}

function shortString(value: unknown, path: string, max: number = INPUT_BOUNDS.string): void {
  if (typeof value === "string" && value.length > max) {
    throw invalid(path, `is ${value.length} characters long; at most ${max} are accepted`);
  }
}

function asObject(v: unknown): Record<string, unknown> | undefined {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? v as Record<string, unknown>
    : undefined;
}

function checkDns(dns: unknown, path: string): void {
  const d = asObject(dns);
  if (!d) return;
  shortString(d.domain, `${path}.domain`);
  for (const k of ["nameservers", "search", "options"]) {
    atMost(d[k], `${path}.${k}`, INPUT_BOUNDS.dnsEntries);
    if (Array.isArray(d[k])) {
      (d[k] as unknown[]).forEach((x, i) => shortString(x, `${path}.${k}[${i}]`));
    }
  }
}

function checkAnnotations(value: unknown, path: string): void {
  const a = asObject(value);
  if (!a) return;
  const keys = Object.keys(a);
  if (keys.length > INPUT_BOUNDS.annotations) {
    throw tooMany(path, keys.length, INPUT_BOUNDS.annotations);
  }
  let chars = 0;
  for (const k of keys) {
    const v = a[k];
    chars += k.length + (typeof v === "string" ? v.length : 0);
    if (k.startsWith("vpcni.io/")) {
      shortString(v, `${path}["${k}"]`, INPUT_BOUNDS.vpcniAnnotation);
    }
  }
  if (chars > INPUT_BOUNDS.annotationChars) {
    throw invalid(
      path,
      `holds ${chars} characters of keys and values; at most ${INPUT_BOUNDS.annotationChars}`,
    );
  }
}

/**
 * Checks the sizes of a decoded configuration: list lengths, the pod annotations, string
 * lengths. Types are not checked here; the parsers do that next. In the IPAM role
 * (`main` false) the top-level fields belong to the main plugin and only the runtime's
 * fields and `ipam` are ours.
 */
export function checkConfigBounds(raw: Record<string, unknown>, main: boolean): void {
  shortString(raw.name, "name", INPUT_BOUNDS.name);
  if (main) {
    for (const k of ["type", "datapath", "hostVethPrefix", "logFile", "logLevel"]) {
      shortString(raw[k], k);
    }
    shortString(raw.daemonSocket, "daemonSocket");
    atMost(raw.serviceCidrs, "serviceCidrs", INPUT_BOUNDS.cidrs);
    atMost(raw.nodeIps, "nodeIps", INPUT_BOUNDS.cidrs);
    checkDns(raw.dns, "dns");
    const caps = asObject(raw.capabilities);
    if (caps && Object.keys(caps).length > INPUT_BOUNDS.capabilities) {
      throw tooMany("capabilities", Object.keys(caps).length, INPUT_BOUNDS.capabilities);
    }
  }
  const ipam = asObject(raw.ipam);
  if (ipam) {
    shortString(ipam.type, "ipam.type");
    shortString(ipam.daemonSocket, "ipam.daemonSocket");
    shortString(ipam.logFile, "ipam.logFile");
    atMost(ipam.routes, "ipam.routes", INPUT_BOUNDS.routes);
  }
  const prev = asObject(raw.prevResult);
  if (prev) {
    atMost(prev.ips, "prevResult.ips", INPUT_BOUNDS.prevResultIps);
    atMost(prev.interfaces, "prevResult.interfaces", INPUT_BOUNDS.prevResultInterfaces);
    atMost(prev.routes, "prevResult.routes", INPUT_BOUNDS.routes);
    checkDns(prev.dns, "prevResult.dns");
  }
  const rc = asObject(raw.runtimeConfig);
  if (rc) {
    const key = "io.kubernetes.cri.pod-annotations";
    checkAnnotations(rc[key], `runtimeConfig["${key}"]`);
  }
  for (const k of ["cni.dev/valid-attachments", "cni.dev/attachments"]) {
    atMost(raw[k], k, INPUT_BOUNDS.validAttachments);
  }
}

/** Refuses a daemon socket path longer than a unix socket address can hold (code 7). */
export function checkSocketPath(path: string, field: string): void {
  const bytes = new TextEncoder().encode(path).length;
  if (bytes > INPUT_BOUNDS.socketPath) {
    throw invalid(
      field,
      `is ${bytes} bytes long; a unix socket path holds at most ${INPUT_BOUNDS.socketPath}`,
    );
  }
}
