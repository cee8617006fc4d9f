/**
 * A blocking request/response exchange over a unix stream socket, through libc via Deno
 * FFI, with `SO_SNDTIMEO`/`SO_RCVTIMEO` bounding connect, send and each receive. It exists
 * because the event-loop path (`Deno.connect` plus a `setTimeout` to bound it) costs more
 * at process start than the whole exchange (see cni/unix_http.ts). It shares netlink/'s
 * libc binding: each `Deno.dlopen` compiles a stub per symbol, which a second binding of
 * the same functions would pay again in every pod's ADD and DEL.
 *
 * @module
 */
import {
  AF_UNIX,
  EINTR,
  errno,
  libc,
  MSG_NOSIGNAL,
  SO_RCVTIMEO,
  SO_SNDTIMEO,
  SOCK_CLOEXEC,
  SOCK_STREAM,
  sockaddrUn,
  SOL_SOCKET,
  strerror,
  timeval,
} from "../base/libc.ts";
import { concatBytes } from "../base/bytes.ts";

/** errno when a receive or send timed out. */
export const EAGAIN = 11;
/** errno when a connect timed out. */
export const EINPROGRESS = 115;

/** A failed socket call, with the C errno. */
export class UnixSocketError extends Error {
  /** The C errno value. */
  readonly errno: number;
  /** `op` is the libc call ("connect"), `path` the socket. */
  constructor(op: string, path: string, code: number) {
    super(`${op} ${path}: ${strerror(code)}`);
    this.name = "UnixSocketError";
    this.errno = code;
  }
}

/** Thrown when the peer sends more than the caller's bound. */
export class UnixAnswerTooLargeError extends Error {
  /** Names the socket and the bound. */
  constructor(path: string, maxBytes: number) {
    super(`${path} sent more than ${maxBytes} bytes`);
    this.name = "UnixAnswerTooLargeError";
  }
}

/** Default bound on an answer: far above any daemon answer (a GC of every pod is ~100 KiB). */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/**
 * Connects to `path`, sends all of `request`, reads until the peer closes, and returns
 * what was read. Each blocking step gives up after `timeoutMs` with errno EAGAIN or
 * EINPROGRESS, and the whole receive too; more than `maxBytes` of answer is
 * {@linkcode UnixAnswerTooLargeError}.
 */
export function unixExchange(
  path: string,
  request: Uint8Array,
  timeoutMs: number,
  maxBytes: number = MAX_ANSWER_BYTES,
): Uint8Array {
  const c = libc();
  const fd = c.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw new UnixSocketError("socket", path, errno());
  try {
    const tv = timeval(timeoutMs);
    if (c.setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, tv, tv.length) < 0) {
      throw new UnixSocketError("setsockopt", path, errno());
    }
    if (c.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, tv, tv.length) < 0) {
      throw new UnixSocketError("setsockopt", path, errno());
    }
    const sa = sockaddrUn(path);
    while (c.connect(fd, sa, sa.length) < 0) {
      const e = errno();
      if (e !== EINTR) throw new UnixSocketError("connect", path, e);
    }
    let off = 0;
    while (off < request.length) {
      const n = Number(
        c.send(fd, request.subarray(off), BigInt(request.length - off), MSG_NOSIGNAL),
      );
      if (n < 0) {
        const e = errno();
        if (e === EINTR) continue;
        throw new UnixSocketError("send", path, e);
      }
      off += n;
    }
    const deadline = performance.now() + timeoutMs;
    const chunks: Uint8Array[] = [];
    let total = 0;
    const buf = new Uint8Array(16 * 1024);
    for (;;) {
      // Each receive waits at most what is left of the timeout, so a peer trickling bytes
      // cannot stretch the exchange past it.
      const left = Math.ceil(deadline - performance.now());
      if (left <= 0) throw new UnixSocketError("recv", path, EAGAIN);
      if (left < timeoutMs) {
        const rtv = timeval(left);
        c.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, rtv, rtv.length);
      }
      const n = Number(c.recv(fd, buf, BigInt(buf.length), 0));
      if (n < 0) {
        const e = errno();
        if (e === EINTR) continue;
        throw new UnixSocketError("recv", path, e);
      }
      if (n === 0) break;
      chunks.push(buf.slice(0, n));
      total += n;
      if (total > maxBytes) throw new UnixAnswerTooLargeError(path, maxBytes);
    }
    return concatBytes(chunks);
  } finally {
    c.close(fd);
  }
}
