/**
 * CNI results: one version-neutral model, a parser for results of any version vpcni speaks
 * (`prevResult`, a delegated IPAM plugin's output), and a writer for a given version.
 *
 * The model is the 1.1 result. Writing it for an older version drops what that version
 * lacks: 1.0.0 has no interface `mtu`/`socketPath`/`pciID` and no route
 * `mtu`/`advmss`/`priority`/`table`/`scope`; 0.3.x and 0.4.0 additionally carry
 * `ips[].version` ("4" or "6").
 *
 * @module
 */
import { arr, cidr, ipAddress, num, obj, optional, type Parser, str } from "../proto/schema.ts";
import { CniError, ErrorCode } from "./errors.ts";
import { hasIpVersionField, hasV11Fields, requireSupportedVersion } from "./versions.ts";

/** An interface in a result. */
export interface ResultInterface {
  name: string;
  mac?: string;
  mtu?: number;
  sandbox?: string;
  socketPath?: string;
  pciID?: string;
}

/** An address in a result; `interface` indexes `interfaces`. */
export interface ResultIp {
  address: string;
  gateway?: string;
  interface?: number;
}

/** A route in a result. */
export interface ResultRoute {
  dst: string;
  gw?: string;
  mtu?: number;
  advmss?: number;
  priority?: number;
  table?: number;
  scope?: number;
}

/** DNS settings in a result or a network configuration. */
export interface ResultDns {
  nameservers?: string[];
  domain?: string;
  search?: string[];
  options?: string[];
}

/** A version-neutral CNI result. */
export interface CniResult {
  interfaces: ResultInterface[];
  ips: ResultIp[];
  routes: ResultRoute[];
  dns?: ResultDns;
}

/** Parses a `dns` object. */
export const parseDns: Parser<ResultDns> = obj({
  nameservers: optional(arr(str())),
  domain: optional(str()),
  search: optional(arr(str())),
  options: optional(arr(str())),
});

// Results come from other programs (the runtime's cache, other plugins): fields this
// version of vpcni does not know are ignored, known ones must have the right type.
const parseInterface = obj({
  name: str({ nonEmpty: true }),
  mac: optional(str()),
  mtu: optional(num({ int: true, min: 0 })),
  sandbox: optional(str()),
  socketPath: optional(str()),
  pciID: optional(str()),
});

const parseIp = obj({
  version: optional(str()),
  address: cidr,
  gateway: optional(ipAddress),
  interface: optional(num({ int: true, min: 0 })),
});

const parseRoute = obj({
  dst: cidr,
  gw: optional(ipAddress),
  mtu: optional(num({ int: true, min: 0 })),
  advmss: optional(num({ int: true, min: 0 })),
  priority: optional(num({ int: true, min: 0 })),
  table: optional(num({ int: true, min: 0 })),
  scope: optional(num({ int: true, min: 0 })),
});

const parseResultObject = obj({
  cniVersion: str({ nonEmpty: true }),
  interfaces: optional(arr(parseInterface)),
  ips: optional(arr(parseIp)),
  routes: optional(arr(parseRoute)),
  dns: optional(parseDns),
});

/** Drops keys whose value is `undefined`, so JSON output stays minimal. */
function compact<T extends object>(o: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out as T;
}

/**
 * Parses a result of any supported version found at `path` (e.g. "prevResult") into the
 * model. Interface indexes must point into `interfaces`; a 0.x `version` must match the
 * address family.
 */
export function parseResult(
  value: unknown,
  path: string,
): { cniVersion: string; result: CniResult } {
  const r = parseResultObject(value, path);
  requireSupportedVersion(r.cniVersion, `${path}.cniVersion`);
  const interfaces = (r.interfaces ?? []).map((i) => compact(i));
  const ips = (r.ips ?? []).map((ip, n) => {
    const family = ip.address.includes(":") ? "6" : "4";
    // libcni writes "version": "" for a 0.x address whose plugin left the field out.
    if (ip.version !== undefined && ip.version !== "" && ip.version !== family) {
      throw new CniError(
        ErrorCode.INVALID_CONFIG,
        `invalid network configuration: ${path}.ips[${n}].version is "${ip.version}" but ${ip.address} is IPv${family}`,
      );
    }
    if (ip.interface !== undefined && ip.interface >= interfaces.length) {
      throw new CniError(
        ErrorCode.INVALID_CONFIG,
        `invalid network configuration: ${path}.ips[${n}].interface ${ip.interface} points past the ${interfaces.length} interfaces`,
      );
    }
    return compact({ address: ip.address, gateway: ip.gateway, interface: ip.interface });
  });
  const routes = (r.routes ?? []).map((x) => compact(x));
  const result: CniResult = { interfaces, ips, routes };
  if (r.dns !== undefined) result.dns = compact(r.dns);
  return { cniVersion: r.cniVersion, result };
}

/** True when a DNS object carries nothing. */
function isEmptyDns(d: ResultDns | undefined): boolean {
  return d === undefined ||
    (!d.nameservers?.length && !d.domain && !d.search?.length && !d.options?.length);
}

/**
 * Writes the model as the JSON object of CNI version `cniVersion` (which must be
 * supported). `omitInterfaces` is for IPAM plugins, whose results have no interfaces.
 */
export function formatResult(
  result: CniResult,
  cniVersion: string,
  opts: { omitInterfaces?: boolean } = {},
): Record<string, unknown> {
  const v11 = hasV11Fields(cniVersion);
  const withIpVersion = hasIpVersionField(cniVersion);
  const out: Record<string, unknown> = { cniVersion };
  if (!opts.omitInterfaces) {
    out.interfaces = result.interfaces.map((i) =>
      compact({
        name: i.name,
        mac: i.mac,
        mtu: v11 ? i.mtu : undefined,
        sandbox: i.sandbox,
        socketPath: v11 ? i.socketPath : undefined,
        pciID: v11 ? i.pciID : undefined,
      })
    );
  }
  out.ips = result.ips.map((ip) =>
    compact({
      version: withIpVersion ? (ip.address.includes(":") ? "6" : "4") : undefined,
      address: ip.address,
      gateway: ip.gateway,
      interface: opts.omitInterfaces ? undefined : ip.interface,
    })
  );
  out.routes = result.routes.map((r) =>
    compact({
      dst: r.dst,
      gw: r.gw,
      mtu: v11 ? r.mtu : undefined,
      advmss: v11 ? r.advmss : undefined,
      priority: v11 ? r.priority : undefined,
      table: v11 ? r.table : undefined,
      scope: v11 ? r.scope : undefined,
    })
  );
  if (!isEmptyDns(result.dns)) out.dns = compact(result.dns!);
  return out;
}

/** The result's first IPv4 address as `{ip, prefixLen, gateway}`, or undefined. */
export function firstIpv4(
  result: CniResult,
): { ip: string; prefixLen: number; gateway?: string } | undefined {
  for (const a of result.ips) {
    if (a.address.includes(":")) continue;
    const [ip, len] = a.address.split("/");
    return { ip, prefixLen: Number(len), gateway: a.gateway };
  }
  return undefined;
}

/**
 * The result of a plugin that ran after others in a chain: `prev` (the earlier plugins'
 * result) passed through with `own` appended. `own`'s `ips[].interface` indexes are moved
 * past `prev`'s interfaces so they still name `own`'s interfaces; routes are concatenated;
 * DNS fields `own` sets win, the rest come from `prev`.
 */
export function mergeResults(prev: CniResult | undefined, own: CniResult): CniResult {
  if (!prev) return own;
  const shift = prev.interfaces.length;
  const merged: CniResult = {
    interfaces: [...prev.interfaces, ...own.interfaces],
    ips: [
      ...prev.ips,
      ...own.ips.map((ip) =>
        ip.interface === undefined ? ip : { ...ip, interface: ip.interface + shift }
      ),
    ],
    routes: [...prev.routes, ...own.routes],
  };
  const dns = mergeDns(own.dns, prev.dns);
  if (dns) merged.dns = dns;
  return merged;
}

/** Merges two DNS settings; fields of `primary` win. */
export function mergeDns(primary?: ResultDns, secondary?: ResultDns): ResultDns | undefined {
  if (isEmptyDns(primary)) return isEmptyDns(secondary) ? undefined : secondary;
  if (isEmptyDns(secondary)) return primary;
  return compact({
    nameservers: primary!.nameservers?.length ? primary!.nameservers : secondary!.nameservers,
    domain: primary!.domain || secondary!.domain,
    search: primary!.search?.length ? primary!.search : secondary!.search,
    options: primary!.options?.length ? primary!.options : secondary!.options,
  });
}
