/**
 * The plugin's side of the plugin ↔ daemon protocol (proto/ipam.ts): one HTTP POST
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
  DAEMON_ERROR_CODES,
  IPAM_PATH,
  IPAM_PROTOCOL_VERSION,
  type IpamAddRequest,
  type IpamCheckRequest,
  type IpamDelRequest,
  type IpamGcRequest,
  type IpamStaleRequest,
  type IpamStatusRequest,
  type IpamStatusResponse,
  MAX_DAEMON_ANSWER_BYTES,
  type PodAllocation,
} from "../proto/ipam.ts";
import { parseAllocation, parseAnswer, parseStatus } from "../proto/ipam_validate.ts";
import type { DaemonSettings } from "./config.ts";
import { postUnix, UnixHttpProtocolError, UnixHttpTimeoutError } from "./unix_http.ts";
import { CniError, ErrorCode } from "./errors.ts";
import { arr, type Parser, plainObject } from "../proto/schema.ts";

export { DAEMON_ERROR_CODES, MAX_DAEMON_ANSWER_BYTES };

/** Bounds on the daemon's `msg` and `details` as passed on. */
const MAX_DAEMON_TEXT = 1024;

/** The daemon's text, cut and without control characters (it reaches logs and terminals). */
export function daemonText(v: unknown): string | undefined {
  if (typeof v !== "string") return undefined;
  // deno-lint-ignore no-control-regex
  const clean = v.replace(/[\x00-\x1f\x7f-\x9f]/g, " ").trim();
  return clean.length > MAX_DAEMON_TEXT ? `${clean.slice(0, MAX_DAEMON_TEXT)}…` : clean;
}

/** A request as the caller writes it: the client adds the protocol version. */
type Unversioned<T> = T extends unknown ? Omit<T, "version"> : never;

/**
 * How a request reaches the daemon: by default one HTTP POST over its unix socket
 * (cni/unix_http.ts). Inside the daemon, where the plugin's verbs run on a worker of their
 * own (ipam/cni_worker.ts), the worker hands the body to the daemon's thread instead.
 * Throws {@linkcode UnixHttpTimeoutError} when no answer comes within `timeoutMs`.
 */
export type DaemonTransport = (
  socket: string,
  body: string,
  timeoutMs: number,
) => { status: number; body: string };

const socketTransport: DaemonTransport = (socket, body, timeoutMs) =>
  postUnix(socket, IPAM_PATH, body, timeoutMs, MAX_DAEMON_ANSWER_BYTES);

let transport: DaemonTransport = socketTransport;

/** Routes every later request of this thread through `t` (the daemon's own worker). */
export function setDaemonTransport(t: DaemonTransport): void {
  transport = t;
}

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
    // The daemon learns the bound so that it answers within it (proto/ipam.ts `waitMs`).
    const bound = this.#settings.addTimeoutMs;
    const body = this.#post({ ...req, waitMs: bound }, bound);
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
    return parseAnswer(parser, value, path, this.#settings.socket);
  }

  #post(
    req: Record<string, unknown>,
    timeoutMs = this.#settings.timeoutMs,
  ): Record<string, unknown> {
    const { socket } = this.#settings;
    const payload = JSON.stringify({ version: IPAM_PROTOCOL_VERSION, ...req });
    let text: string;
    let status: number;
    try {
      ({ status, body: text } = transport(socket, payload, timeoutMs));
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
