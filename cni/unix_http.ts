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

/** An HTTP answer: status code and body text. */
export interface UnixHttpResponse {
  status: number;
  body: string;
}

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

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function indexOfCrlfCrlf(b: Uint8Array): number {
  for (let i = 0; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/** Decodes a chunked transfer-encoded body. */
export function decodeChunked(b: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  let i = 0;
  for (;;) {
    let eol = i;
    while (eol + 1 < b.length && !(b[eol] === 13 && b[eol + 1] === 10)) eol++;
    if (eol + 1 >= b.length) throw new Error("truncated chunked body");
    const size = parseInt(decoder.decode(b.subarray(i, eol)).split(";")[0].trim(), 16);
    if (!Number.isFinite(size)) throw new Error("malformed chunk size");
    if (size === 0) break;
    const start = eol + 2;
    if (start + size > b.length) throw new Error("truncated chunk");
    parts.push(b.subarray(start, start + size));
    i = start + size + 2;
  }
  return concat(parts);
}

/** Parses a complete HTTP/1.1 response (head and body, read to EOF). */
export function parseHttpResponse(raw: Uint8Array): UnixHttpResponse {
  const headEnd = indexOfCrlfCrlf(raw);
  if (headEnd < 0) throw new Error("no HTTP header in the answer");
  const head = decoder.decode(raw.subarray(0, headEnd)).split("\r\n");
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head[0]);
  if (!status) throw new Error(`not an HTTP status line: ${JSON.stringify(head[0].slice(0, 80))}`);
  const headers = new Map<string, string>();
  for (const line of head.slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) {
      headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
  }
  let body = raw.subarray(headEnd + 4);
  if (headers.get("transfer-encoding")?.toLowerCase().includes("chunked")) {
    body = decodeChunked(body);
  } else if (headers.has("content-length")) {
    body = body.subarray(0, Number(headers.get("content-length")));
  }
  return { status: Number(status[1]), body: decoder.decode(body) };
}

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
  const payload = encoder.encode(body);
  const head = encoder.encode(
    `POST ${urlPath} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n` +
      `content-length: ${payload.length}\r\nconnection: close\r\n\r\n`,
  );
  let raw: Uint8Array;
  try {
    raw = unixExchange(socketPath, concat([head, payload]), timeoutMs, maxBytes);
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
