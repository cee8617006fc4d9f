/**
 * One HTTP/1.1 POST over a unix socket, for the plugin's single daemon round trip per
 * process. Measured here in a fresh process: the first `fetch` costs 9–30 ms of lazy
 * set-up and the first `setTimeout` (needed to bound a `Deno.connect` exchange) 4–12 ms,
 * while the round trip itself takes ~0.3 ms. So the exchange is a blocking socket with
 * kernel timeouts (cni/unix_socket.ts) and this file only writes and parses HTTP. The
 * request closes the connection, so the answer ends at EOF; `content-length` and chunked
 * bodies are both understood.
 *
 * @module
 */
import {
  EAGAIN,
  EINPROGRESS,
  UnixAnswerTooLargeError,
  unixExchange,
  UnixSocketError,
} from "./unix_socket.ts";

export { UnixSocketError };

/** Thrown when the server does not answer within the timeout. */
export class UnixHttpTimeoutError extends Error {
  /** Names the socket and the timeout. */
  constructor(path: string, timeoutMs: number) {
    super(`no answer from ${path} within ${timeoutMs} ms`);
    this.name = "UnixHttpTimeoutError";
  }
}

/** Thrown when the server's answer is not HTTP, or larger than the bound. */
export class UnixHttpProtocolError extends Error {
  /** Says what was wrong with the answer. */
  constructor(message: string) {
    super(message);
    this.name = "UnixHttpProtocolError";
  }
}

import { httpPost, parseHttpResponse, type UnixHttpResponse } from "./http_wire.ts";

export { decodeChunked, parseHttpResponse, type UnixHttpResponse } from "./http_wire.ts";

/**
 * POSTs `body` (JSON) to `urlPath` on the HTTP server at unix socket `socketPath` and
 * returns its answer. Synchronous and bounded: connect, send and the receive give up
 * after `timeoutMs` ({@linkcode UnixHttpTimeoutError}); an answer that is not HTTP or
 * exceeds `maxBytes` is a {@linkcode UnixHttpProtocolError}; other socket failures throw a
 * {@linkcode UnixSocketError} carrying errno (ENOENT, ECONNREFUSED, …).
 */
export function postUnix(
  socketPath: string,
  urlPath: string,
  body: string,
  timeoutMs: number,
  maxBytes?: number,
): UnixHttpResponse {
  let raw: Uint8Array;
  try {
    raw = unixExchange(socketPath, httpPost(urlPath, body), timeoutMs, maxBytes);
  } catch (e) {
    if (e instanceof UnixSocketError && (e.errno === EAGAIN || e.errno === EINPROGRESS)) {
      throw new UnixHttpTimeoutError(socketPath, timeoutMs);
    }
    if (e instanceof UnixAnswerTooLargeError) throw new UnixHttpProtocolError(e.message);
    throw e;
  }
  try {
    return parseHttpResponse(raw);
  } catch (e) {
    throw new UnixHttpProtocolError(`${socketPath} answered outside HTTP: ${(e as Error).message}`);
  }
}
