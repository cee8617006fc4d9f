/**
 * The plugin's side of the plugin ↔ daemon protocol (cni/ipam_protocol.ts): one HTTP POST
 * over the daemon's unix socket, with a bounded timeout, on a small blocking HTTP/1.1
 * client (cni/unix_http.ts: a process's first `fetch` costs more than the round trip). An
 * unreachable or silent daemon is code 11 (try again later) naming the socket; an answer
 * outside the protocol is code 102: not HTTP, larger than {@linkcode MAX_DAEMON_ANSWER_BYTES},
 * not a JSON object, missing fields, or a refusal whose code is not one of
 * {@linkcode DAEMON_ERROR_CODES}. The daemon's own text is passed on only bounded and with
 * control characters removed.
 *
 * @module
 */
import {
  type EniInfo,
  IPAM_PATH,
  IPAM_PROTOCOL_VERSION,
  type IpamAddRequest,
  type IpamCheckRequest,
  type IpamDelRequest,
  type IpamGcRequest,
  type IpamStaleRequest,
  type IpamStatusRequest,
  type IpamStatusResponse,
  type PodAllocation,
} from "./ipam_protocol.ts";
import type { DaemonSettings } from "./config.ts";
import { postUnix, UnixHttpProtocolError, UnixHttpTimeoutError } from "./unix_http.ts";
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
  str,
} from "./schema.ts";

/**
 * The codes a daemon refusal may carry, passed on to the runtime as they are: 3 (unknown
 * attachment on CHECK), 4 and 7 (the request or an annotation is wrong), 5 (the daemon
 * could not write its checkpoint; an ADD reserved nothing), 11 (no address in time, or
 * EC2/IMDS failed: try again), 50 and 51 (STATUS), 106 (ADD of an attachment that already
 * holds an address), 999 (a bug in the daemon, with its message; retrying will not help).
 * Any other code — negative, not an integer, a
 * code of the spec's that means something else here (1 and 6 are the daemon's complaints
 * about the plugin's request, not about the network configuration), or one of vpcni's own —
 * becomes 102 with the plugin's message.
 */
export const DAEMON_ERROR_CODES: readonly number[] = [3, 4, 5, 7, 11, 50, 51, 106, 999];

/** Bound on a daemon answer, in bytes (a GC releasing every pod of a node is ~100 KiB). */
export const MAX_DAEMON_ANSWER_BYTES = 1024 * 1024;

/** Bounds on the daemon's `msg` and `details` as passed on. */
const MAX_DAEMON_TEXT = 1024;

/** The daemon's text, cut and without control characters (it reaches logs and terminals). */
function daemonText(v: unknown): string | undefined {
  if (typeof v !== "string") return undefined;
  // deno-lint-ignore no-control-regex
  const clean = v.replace(/[\x00-\x1f\x7f-\x9f]/g, " ").trim();
  return clean.length > MAX_DAEMON_TEXT ? `${clean.slice(0, MAX_DAEMON_TEXT)}…` : clean;
}

/** A request as the caller writes it: the client adds the protocol version. */
type Unversioned<T> = T extends unknown ? Omit<T, "version"> : never;

const parseEni: Parser<EniInfo> = obj({
  id: str({ nonEmpty: true }),
  mac: str({ pattern: /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/, hint: "a lower-case MAC address" }),
  deviceIndex: num({ int: true, min: 0 }),
  primary: bool,
  subnetId: str(),
  subnetCidr: ipv4Cidr,
  gateway: ipv4,
  routeTable: num({ int: true, min: 0 }),
  primaryIp: optional(ipv4),
});

const parseAllocation: Parser<PodAllocation> = obj({
  network: str(),
  containerId: str(),
  ifName: str(),
  ip: ipv4,
  pool: str(),
  eni: parseEni,
  vpcCidrs: arr(ipv4Cidr),
  nodeIps: arr(ipv4),
  nodeEniMacs: optional(
    arr(str({ pattern: /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/, hint: "a lower-case MAC address" })),
  ),
});

const parseStatus: Parser<IpamStatusResponse> = (v, p) => {
  const s = obj({ pool: str(), available: num({ int: true, min: 0 }), canGrow: bool })(v, p);
  return { ok: true, ...s };
};

/** Talks to the IPAM daemon; one instance per invocation. Calls block (bounded). */
export class IpamClient {
  #settings: DaemonSettings;

  /** Makes a client for the daemon at `settings.socket`. */
  constructor(settings: DaemonSettings) {
    this.#settings = settings;
  }

  /** The socket path, for messages. */
  get socket(): string {
    return this.#settings.socket;
  }

  /** Reserves an address for an attachment (ADD). */
  add(req: Unversioned<IpamAddRequest>): PodAllocation {
    const body = this.#post(req);
    return this.#parse(parseAllocation, body.allocation, "allocation");
  }

  /** Releases an attachment's reservation (DEL); unknown attachments release nothing. */
  del(req: Unversioned<IpamDelRequest>): PodAllocation[] {
    const body = this.#post(req);
    return this.#parse(arr(parseAllocation), body.released, "released");
  }

  /** Reads an attachment's reservation (CHECK); code 3 from the daemon when unknown. */
  check(req: Unversioned<IpamCheckRequest>): PodAllocation {
    const body = this.#post(req);
    return this.#parse(parseAllocation, body.allocation, "allocation");
  }

  /** Releases every reservation of a network but the valid ones (GC). */
  gc(req: Unversioned<IpamGcRequest>): PodAllocation[] {
    const body = this.#post(req);
    return this.#parse(arr(parseAllocation), body.released, "released");
  }

  /** Lists the reservations GC would release, releasing none (GC's first half). */
  stale(req: Unversioned<IpamStaleRequest>): PodAllocation[] {
    const body = this.#post(req);
    return this.#parse(arr(parseAllocation), body.stale, "stale");
  }

  /** Asks whether an ADD could be served now (STATUS). */
  status(req: Unversioned<IpamStatusRequest>): IpamStatusResponse {
    const body = this.#post(req);
    return this.#parse(parseStatus, body, "status");
  }

  /** Nothing to release: each request opens and closes its own connection. */
  close(): void {}

  #parse<T>(parser: Parser<T>, value: unknown, path: string): T {
    try {
      return parser(value, path);
    } catch (e) {
      throw new CniError(
        ErrorCode.DAEMON_PROTOCOL,
        `IPAM daemon at ${this.#settings.socket} sent a malformed answer`,
        (e as Error).message,
      );
    }
  }

  #post(req: Record<string, unknown>): Record<string, unknown> {
    const { socket, timeoutMs } = this.#settings;
    const payload = JSON.stringify({ version: IPAM_PROTOCOL_VERSION, ...req });
    let text: string;
    let status: number;
    try {
      ({ status, body: text } = postUnix(
        socket,
        IPAM_PATH,
        payload,
        timeoutMs,
        MAX_DAEMON_ANSWER_BYTES,
      ));
    } catch (e) {
      if (e instanceof UnixHttpTimeoutError) {
        throw new CniError(
          ErrorCode.TRY_AGAIN_LATER,
          `IPAM daemon at ${socket} did not answer ${req.op} within ${timeoutMs} ms`,
          "the daemon may be busy growing its pool; the runtime retries",
        );
      }
      if (e instanceof UnixHttpProtocolError) {
        throw new CniError(
          ErrorCode.DAEMON_PROTOCOL,
          `IPAM daemon at ${socket} answered ${req.op} outside the protocol`,
          `${e.message}; is daemonSocket the socket of 'vpcni serve'?`,
        );
      }
      throw new CniError(
        ErrorCode.TRY_AGAIN_LATER,
        `IPAM daemon unreachable at ${socket}`,
        `${(e as Error).message}; is 'vpcni serve' running and is daemonSocket right?`,
      );
    }
    let body: Record<string, unknown>;
    try {
      body = plainObject(JSON.parse(text), "daemon answer");
    } catch {
      throw new CniError(
        ErrorCode.DAEMON_PROTOCOL,
        `IPAM daemon at ${socket} answered ${req.op} with HTTP ${status} and a body that is not a JSON object`,
        daemonText(text.slice(0, 500)),
      );
    }
    if (body.ok === false) {
      const code = body.code;
      const msg = daemonText(body.msg);
      const details = daemonText(body.details);
      if (
        typeof code === "number" && DAEMON_ERROR_CODES.includes(code) && msg !== undefined &&
        msg !== ""
      ) {
        throw new CniError(code, msg, details);
      }
      throw new CniError(
        ErrorCode.DAEMON_PROTOCOL,
        `IPAM daemon at ${socket} refused ${req.op} with ${
          typeof code === "number" ? `code ${code}` : "no numeric code"
        }, which the plugin↔daemon protocol does not allow`,
        `the daemon said: ${msg || "(no message)"}${details ? ` (${details})` : ""}; ` +
          "are the plugin and 'vpcni serve' from the same release?",
      );
    }
    if (body.ok !== true) {
      throw new CniError(
        ErrorCode.DAEMON_PROTOCOL,
        `IPAM daemon at ${socket} answered ${req.op} without "ok" (HTTP ${status})`,
        daemonText(text.slice(0, 500)),
      );
    }
    return body;
  }
}
