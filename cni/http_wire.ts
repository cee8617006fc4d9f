/**
 * HTTP/1.1 on the wire, for the plugin's one round trip to the daemon: the request's bytes
 * and the parse of a complete answer read to EOF. No I/O here, so both the blocking client
 * (cni/unix_http.ts) and the thin plugin's (cni/thin.ts) use it.
 *
 * @module
 */

import { concatBytes } from "../base/bytes.ts";

/** An HTTP answer: status code and body text. */
export interface UnixHttpResponse {
  status: number;
  body: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function indexOfCrlfCrlf(b: Uint8Array): number {
  for (let i = 0; i + 3 < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && b[i + 2] === 13 && b[i + 3] === 10) return i;
  }
  return -1;
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
  return concatBytes(parts);
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

/** The bytes of a `POST urlPath` carrying `body` (JSON), closing the connection after. */
export function httpPost(urlPath: string, body: string): Uint8Array {
  const payload = encoder.encode(body);
  const head = encoder.encode(
    `POST ${urlPath} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n` +
      `content-length: ${payload.length}\r\nconnection: close\r\n\r\n`,
  );
  return concatBytes([head, payload]);
}
