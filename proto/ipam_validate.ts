/**
 * The validators of the plugin ↔ daemon protocol (proto/ipam.ts), one for each side: the
 * daemon parses requests with {@linkcode parseIpamRequest}, the plugin parses answers with
 * {@linkcode parseAllocation} and friends. Built on proto/schema.ts, the project's own small
 * validator: the plugin's path loads no npm.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";
import {
  arr,
  bool,
  ipv4,
  ipv4Cidr,
  num,
  obj,
  optional,
  type Parser,
  plainObject,
  record,
  str,
} from "./schema.ts";
import {
  CNI_PROTOCOL_VERSION,
  type CniRunResponse,
  type EniInfo,
  IPAM_PROTOCOL_VERSION,
  type IpamErrorResponse,
  type IpamRequest,
  type IpamStatusResponse,
  type PodAllocation,
  REQUEST_ERROR,
  SPOKEN_PROTOCOL_VERSIONS,
} from "./ipam.ts";

const MAC = str({ pattern: /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/, hint: "a lower-case MAC address" });

/** Parses an {@linkcode EniInfo}. */
export const parseEni: Parser<EniInfo> = obj({
  id: str({ nonEmpty: true }),
  mac: MAC,
  deviceIndex: num({ int: true, min: 0 }),
  primary: bool,
  subnetId: str(),
  subnetCidr: ipv4Cidr,
  gateway: ipv4,
  routeTable: num({ int: true, min: 0 }),
  primaryIp: optional(ipv4),
});

/** Parses a {@linkcode PodAllocation}. */
export const parseAllocation: Parser<PodAllocation> = obj({
  network: str(),
  containerId: str(),
  ifName: str(),
  ip: ipv4,
  pool: str(),
  eni: parseEni,
  vpcCidrs: arr(ipv4Cidr),
  nodeIps: arr(ipv4),
  nodeEniMacs: optional(arr(MAC)),
});

/** Parses the fields of an {@linkcode IpamStatusResponse}. */
export const parseStatus: Parser<IpamStatusResponse> = (v, p) => {
  const s = obj({ pool: str(), available: num({ int: true, min: 0 }), canGrow: bool })(v, p);
  return { ok: true, ...s };
};

/** Parses the fields of a {@linkcode CniRunResponse}. */
export const parseCniRun: Parser<CniRunResponse> = (v, p) => {
  const s = obj({ exitCode: num({ int: true, min: 0, max: 255 }), stdout: str() })(v, p);
  return { ok: true, version: CNI_PROTOCOL_VERSION, ...s };
};

const name = str({ nonEmpty: true });
const ifName = (v: unknown, p: string): string => {
  const s = name(v, p);
  if (s.length > 15) throw new CniError(ErrorCode.INVALID_CONFIG, `${p} is over 15 characters`);
  return s;
};
const key = { network: name, containerId: name, ifName };
const attachments = arr(obj({ containerId: str(), ifName: str() }));

const requestParsers: { [Op in IpamRequest["op"]]: Parser<Extract<IpamRequest, { op: Op }>> } = {
  add: obj({
    version: (): typeof IPAM_PROTOCOL_VERSION => IPAM_PROTOCOL_VERSION,
    op: () => "add" as const,
    ...key,
    netns: str(),
    podNamespace: optional(str()),
    podName: optional(str()),
    podUid: optional(str()),
    annotations: optional(record(str())),
    waitMs: optional(num({ int: true, min: 1, max: 3_600_000 })),
    netnsHidden: optional(bool),
  }),
  del: obj({
    version: (): typeof IPAM_PROTOCOL_VERSION => IPAM_PROTOCOL_VERSION,
    op: () => "del" as const,
    ...key,
  }),
  check: obj({
    version: (): typeof IPAM_PROTOCOL_VERSION => IPAM_PROTOCOL_VERSION,
    op: () => "check" as const,
    ...key,
  }),
  gc: obj({
    version: (): typeof IPAM_PROTOCOL_VERSION => IPAM_PROTOCOL_VERSION,
    op: () => "gc" as const,
    network: name,
    validAttachments: attachments,
  }),
  stale: obj({
    version: (): typeof IPAM_PROTOCOL_VERSION => IPAM_PROTOCOL_VERSION,
    op: () => "stale" as const,
    network: name,
    validAttachments: attachments,
  }),
  status: obj({
    version: (): typeof IPAM_PROTOCOL_VERSION => IPAM_PROTOCOL_VERSION,
    op: () => "status" as const,
    pool: optional(str()),
  }),
  cni: obj({
    version: (): typeof CNI_PROTOCOL_VERSION => CNI_PROTOCOL_VERSION,
    op: () => "cni" as const,
    env: record(str()),
    stdin: str(),
    netnsFd: optional(str({ pattern: /^[0-9a-f]{32}$/, hint: "a token of the netns socket" })),
  }),
};

/** The version each request needs. */
const OP_VERSION: Record<IpamRequest["op"], number> = {
  add: IPAM_PROTOCOL_VERSION,
  del: IPAM_PROTOCOL_VERSION,
  check: IPAM_PROTOCOL_VERSION,
  gc: IPAM_PROTOCOL_VERSION,
  stale: IPAM_PROTOCOL_VERSION,
  status: IPAM_PROTOCOL_VERSION,
  cni: CNI_PROTOCOL_VERSION,
};

/**
 * The daemon's side: a request body as the daemon reads it, or the refusal to answer (code 1
 * for a version this release does not speak for that request, 6 for anything malformed).
 */
export function parseIpamRequest(body: string): IpamRequest | IpamErrorResponse {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (e) {
    return {
      ok: false,
      code: REQUEST_ERROR.MALFORMED,
      msg: `request is not JSON: ${(e as Error).message}`,
    };
  }
  let o: Record<string, unknown>;
  try {
    o = plainObject(raw, "(body)");
  } catch {
    return {
      ok: false,
      code: REQUEST_ERROR.MALFORMED,
      msg: "bad IPAM request: (body): not an object",
    };
  }
  const op = typeof o.op === "string" && Object.hasOwn(requestParsers, o.op)
    ? o.op as IpamRequest["op"]
    : undefined;
  if (
    Object.hasOwn(o, "version") &&
    !(op ? o.version === OP_VERSION[op] : SPOKEN_PROTOCOL_VERSIONS.includes(o.version as number))
  ) {
    return {
      ok: false,
      code: REQUEST_ERROR.VERSION,
      msg: `IPAM protocol version ${String(o.version)} is not spoken${op ? ` for ${op}` : ""}; ` +
        `this daemon speaks ${SPOKEN_PROTOCOL_VERSIONS.join(" and ")}`,
    };
  }
  if (!op) {
    return {
      ok: false,
      code: REQUEST_ERROR.MALFORMED,
      msg: `bad IPAM request: op: expected one of ${Object.keys(requestParsers).join(", ")}`,
    };
  }
  if (o.version === undefined) {
    return { ok: false, code: REQUEST_ERROR.MALFORMED, msg: "bad IPAM request: version: required" };
  }
  try {
    return requestParsers[op](o, "");
  } catch (e) {
    const msg = (e as Error).message.replace(/^invalid network configuration: /, "");
    return { ok: false, code: REQUEST_ERROR.MALFORMED, msg: `bad IPAM request: ${msg}` };
  }
}

/** Parses `value` with `parser`, or throws code 102 naming the daemon's socket. */
export function parseAnswer<T>(parser: Parser<T>, value: unknown, path: string, socket: string): T {
  try {
    return parser(value, path);
  } catch (e) {
    throw new CniError(
      ErrorCode.DAEMON_PROTOCOL,
      `IPAM daemon at ${socket} sent a malformed answer`,
      (e as Error).message,
    );
  }
}
