/**
 * A NETLINK_ROUTE socket: send a request and wait for its ack, dump a table, or pipeline
 * many requests. Errors come back as the typed errors of errors.ts, with extended-ack text.
 *
 * A socket opened with {@linkcode NetlinkSocket.openIn} stays bound to that netns for its
 * whole life, wherever the thread is afterwards.
 *
 * @module
 */

import {
  AF_NETLINK,
  EINTR,
  errno,
  libc,
  NETLINK_CAP_ACK,
  NETLINK_EXT_ACK,
  NETLINK_ROUTE,
  SO_RCVBUF,
  SO_SNDBUF,
  SOCK_CLOEXEC,
  SOCK_RAW,
  SOL_NETLINK,
  SOL_SOCKET,
} from "../base/libc.ts";
import {
  type MessageBuilder,
  messageTypeName,
  type NetlinkMessage,
  NLM_F_ACK,
  NLM_F_DUMP_INTR,
  NLMSG_DONE,
  NLMSG_ERROR,
  parseErrorMessage,
  parseMessages,
} from "./codec.ts";
import { errorFromErrno, lastError, NetlinkError } from "./errors.ts";
import { inNetns } from "./netns.ts";
import { OwnedFd } from "./owned_fd.ts";
import { concatBytes } from "../base/bytes.ts";

/** The kernel never sends a netlink datagram larger than 32 KiB to us; leave room. */
const RECV_SIZE = 64 * 1024;
const RECV_SIZE_BIG = BigInt(RECV_SIZE);
const MSG_TRUNC = 0x20;
/** Requests in flight at once when pipelining: keeps the acks well inside the rcvbuf. */
const PIPELINE_WINDOW = 64;
/** Passes of one dump the kernel may mark interrupted before it is given up. */
export const DUMP_ATTEMPTS = 5;

let recvBuf: Uint8Array | undefined;

function setIntOption(fd: number, level: number, name: number, value: number): boolean {
  const v = new Uint8Array(4);
  new DataView(v.buffer).setInt32(0, value, true);
  return libc().setsockopt(fd, level, name, v, 4) === 0;
}

/**
 * Every pass of a dump came back marked interrupted (NLM_F_DUMP_INTR): the table kept
 * changing while the kernel walked it, so no consistent copy could be read. errno is EINTR.
 */
export class DumpInterruptedError extends NetlinkError {
  /** Passes made, each of them interrupted. */
  readonly attempts: number;

  /** Builds the error for the dump `op` (e.g. "RTM_GETROUTE"). */
  constructor(op: string, attempts: number) {
    super({ errno: EINTR, op });
    this.message = `${op} dump: the kernel marked all ${attempts} passes interrupted ` +
      "(NLM_F_DUMP_INTR: the table changed while it was read); no consistent copy was read";
    this.attempts = attempts;
  }
}

/** One pass over a dump: the entries kept and whether the kernel marked it interrupted. */
export interface DumpPass<T> {
  entries: T[];
  interrupted: boolean;
}

/**
 * Runs `pass` until a dump comes back whole. A pass the kernel marked interrupted (its
 * entries may miss or repeat objects) is thrown away and the dump asked for again, at most
 * `attempts` times in all; then {@linkcode DumpInterruptedError}, never a partial table.
 */
export function untilWholeDump<T>(
  op: string,
  pass: () => DumpPass<T>,
  attempts = DUMP_ATTEMPTS,
): T[] {
  for (let i = 1;; i++) {
    const p = pass();
    if (!p.interrupted) return p.entries;
    if (i >= attempts) throw new DumpInterruptedError(op, attempts);
  }
}

/**
 * Reads the replies to the dump request `seq` until NLMSG_DONE: `receive` gives the messages
 * of the next datagram, `parse` keeps an entry (undefined skips it), `fail` turns an
 * NLMSG_ERROR into its typed error (undefined for an ack). Replies to other requests are
 * skipped. Interrupted when any reply carries NLM_F_DUMP_INTR.
 */
export function readDumpPass<T>(
  receive: () => NetlinkMessage[],
  seq: number,
  op: string,
  parse: (msg: NetlinkMessage) => T | undefined,
  fail: (msg: NetlinkMessage) => NetlinkError | undefined,
): DumpPass<T> {
  const entries: T[] = [];
  let interrupted = false;
  for (;;) {
    for (const msg of receive()) {
      if (msg.seq !== seq) continue;
      if (msg.flags & NLM_F_DUMP_INTR) interrupted = true;
      if (msg.type === NLMSG_DONE) {
        if (msg.data.length >= 4) {
          const code = -new DataView(msg.data.buffer, msg.data.byteOffset).getInt32(0, true);
          if (code > 0) throw errorFromErrno({ errno: code, op });
        }
        return { entries, interrupted };
      }
      if (msg.type === NLMSG_ERROR) {
        const err = fail(msg);
        if (err) throw err;
        continue;
      }
      const v = parse(msg);
      if (v !== undefined) entries.push(v);
    }
  }
}

/** One request of a pipelined batch. */
export interface BatchRequest {
  /** The request (its own builder: each is finished in place); NLM_F_ACK is added. */
  message: MessageBuilder;
  /** What it is about, for the error message. */
  subject?: string;
}

/** A netlink socket (NETLINK_ROUTE unless opened for another protocol) in the netns where it was opened. */
export class NetlinkSocket extends OwnedFd {
  private seq: number;

  private constructor(fd: number) {
    super(fd);
    this.seq = (Date.now() & 0x7fffffff) >>> 0;
  }

  /**
   * Opens a socket in the calling thread's current netns; `protocol` is NETLINK_ROUTE unless
   * given (nf_tables speaks NETLINK_NETFILTER).
   */
  static open(protocol: number = NETLINK_ROUTE): NetlinkSocket {
    const l = libc();
    const fd = l.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
    if (fd < 0) throw lastError("socket", "AF_NETLINK");
    const addr = new Uint8Array(12);
    new DataView(addr.buffer).setUint16(0, AF_NETLINK, true);
    if (l.bind(fd, addr, 12) !== 0) {
      const code = errno();
      l.close(fd);
      throw errorFromErrno({ errno: code, op: "bind", subject: "AF_NETLINK" });
    }
    // Best effort: older kernels lack these, and requests work without them.
    setIntOption(fd, SOL_NETLINK, NETLINK_EXT_ACK, 1);
    setIntOption(fd, SOL_NETLINK, NETLINK_CAP_ACK, 1);
    setIntOption(fd, SOL_SOCKET, SO_RCVBUF, 1 << 20);
    setIntOption(fd, SOL_SOCKET, SO_SNDBUF, 1 << 20);
    return new NetlinkSocket(fd);
  }

  /** Opens a socket inside the netns at `netnsPath` (the thread returns to its own). */
  static openIn(netnsPath: string, protocol: number = NETLINK_ROUTE): NetlinkSocket {
    return inNetns(netnsPath, () => NetlinkSocket.open(protocol));
  }

  /** The next sequence number (never 0). */
  private nextSeq(): number {
    this.seq = (this.seq + 1) >>> 0;
    if (this.seq === 0) this.seq = 1;
    return this.seq;
  }

  /** Sends one datagram, retrying on EINTR. */
  private send(bytes: Uint8Array, op: string): void {
    if (this.closed) throw new Error("netlink socket is closed");
    for (;;) {
      const n = Number(libc().send(this.fd, bytes, BigInt(bytes.length), 0));
      if (n >= 0) return;
      const code = errno();
      if (code !== EINTR) throw errorFromErrno({ errno: code, op: `send ${op}` });
    }
  }

  /** Receives one datagram into the shared buffer; the messages are views into it. */
  private receive(op: string): NetlinkMessage[] {
    recvBuf ??= new Uint8Array(RECV_SIZE);
    for (;;) {
      const n = Number(libc().recv(this.fd, recvBuf, RECV_SIZE_BIG, MSG_TRUNC));
      if (n >= 0) {
        if (n > RECV_SIZE) throw new Error(`${op}: netlink reply of ${n} bytes was truncated`);
        return parseMessages(recvBuf.subarray(0, n));
      }
      const code = errno();
      if (code !== EINTR) throw errorFromErrno({ errno: code, op: `recv ${op}` });
    }
  }

  /** The typed error an NLMSG_ERROR carries, or undefined for an ack. */
  private fail(msg: NetlinkMessage, subject?: string): NetlinkError | undefined {
    const e = parseErrorMessage(msg);
    if (e.errno === 0) return undefined;
    return errorFromErrno({
      errno: e.errno,
      op: messageTypeName(e.requestType),
      subject,
      extack: e.extack,
    });
  }

  /** Sends one request and waits for the kernel's ack; throws the typed error on failure. */
  request(message: MessageBuilder, subject?: string): void {
    const seq = this.nextSeq();
    const bytes = message.finish(seq);
    const op = messageTypeName(new DataView(bytes.buffer, bytes.byteOffset).getUint16(4, true));
    bytes[6] |= NLM_F_ACK;
    this.send(bytes, op);
    for (;;) {
      for (const msg of this.receive(op)) {
        if (msg.seq !== seq || msg.type !== NLMSG_ERROR) continue;
        const err = this.fail(msg, subject);
        if (err) throw err;
        return;
      }
    }
  }

  /**
   * Sends a GET for one object and returns what `parse` makes of the reply. The reply view
   * is only valid inside `parse`.
   */
  get<T>(message: MessageBuilder, parse: (msg: NetlinkMessage) => T, subject?: string): T {
    const seq = this.nextSeq();
    const bytes = message.finish(seq);
    const op = messageTypeName(new DataView(bytes.buffer, bytes.byteOffset).getUint16(4, true));
    this.send(bytes, op);
    for (;;) {
      for (const msg of this.receive(op)) {
        if (msg.seq !== seq) continue;
        if (msg.type === NLMSG_ERROR) {
          const err = this.fail(msg, subject);
          if (err) throw err;
          continue;
        }
        return parse(msg);
      }
    }
  }

  /**
   * Dumps a table (the message must carry NLM_F_DUMP) and keeps what `parse` returns for each
   * entry (undefined skips it). A dump the kernel marks interrupted is asked for again, up to
   * {@linkcode DUMP_ATTEMPTS} passes, then {@linkcode DumpInterruptedError}.
   */
  dump<T>(message: MessageBuilder, parse: (msg: NetlinkMessage) => T | undefined): T[] {
    const head = message.finish(0);
    const op = messageTypeName(new DataView(head.buffer, head.byteOffset).getUint16(4, true));
    return untilWholeDump(op, () => {
      const seq = this.nextSeq();
      this.send(message.finish(seq), op);
      return readDumpPass(() => this.receive(op), seq, op, parse, (msg) => this.fail(msg));
    });
  }

  /**
   * Sends an nfnetlink transaction in one datagram: `begin`, every request (each acked),
   * `end`; then `fence` (a GET sent on its own, whose answer comes after every ack of the
   * transaction). The kernel applies all requests or none; the first error is thrown,
   * naming its request.
   */
  transaction(
    begin: MessageBuilder,
    requests: BatchRequest[],
    end: MessageBuilder,
    fence: MessageBuilder,
  ): void {
    const parts: Uint8Array[] = [begin.finish(this.nextSeq())];
    const seqToIndex = new Map<number, number>();
    requests.forEach((r, i) => {
      const seq = this.nextSeq();
      const b = r.message.finish(seq);
      b[6] |= NLM_F_ACK;
      parts.push(b);
      seqToIndex.set(seq, i);
    });
    parts.push(end.finish(this.nextSeq()));
    const dgram = concatBytes(parts);
    // The kernel handles a datagram inside send(): once the fence (sent on its own, since a
    // batch takes its whole datagram) is answered, every ack of the batch is in hand.
    this.send(dgram, "transaction");
    const fenceSeq = this.nextSeq();
    this.send(fence.finish(fenceSeq), "transaction");
    let first: { i: number; e: NetlinkError } | undefined;
    for (let fenced = false; !fenced;) {
      for (const msg of this.receive("transaction")) {
        if (msg.seq === fenceSeq) {
          fenced = true;
          continue;
        }
        if (msg.type !== NLMSG_ERROR) continue;
        const i = seqToIndex.get(msg.seq);
        if (i === undefined) continue;
        const err = this.fail(msg, requests[i].subject);
        if (err && (!first || i < first.i)) first = { i, e: err };
      }
    }
    if (first) throw first.e;
  }

  /**
   * Sends many requests without waiting for each ack (several per datagram, a bounded
   * window in flight), then collects every ack. All requests are tried; the errors come
   * back in request order (empty when everything succeeded).
   */
  requestBatch(requests: BatchRequest[]): NetlinkError[] {
    const errors: { i: number; e: NetlinkError }[] = [];
    const seqToIndex = new Map<number, number>();
    let next = 0;
    let pending = 0;
    while (next < requests.length || pending > 0) {
      // Refill the window once half of it is acked, packing the requests into one datagram.
      const parts: Uint8Array[] = [];
      const refill = pending <= PIPELINE_WINDOW / 2;
      while (refill && next < requests.length && pending < PIPELINE_WINDOW) {
        const seq = this.nextSeq();
        const b = requests[next].message.finish(seq);
        b[6] |= NLM_F_ACK;
        parts.push(b);
        seqToIndex.set(seq, next);
        next++;
        pending++;
      }
      if (parts.length > 0) this.send(concatBytes(parts), "batch");
      // Drain whatever acks are ready; at least one datagram.
      for (const msg of this.receive("batch")) {
        if (msg.type !== NLMSG_ERROR) continue;
        const i = seqToIndex.get(msg.seq);
        if (i === undefined) continue;
        seqToIndex.delete(msg.seq);
        pending--;
        const err = this.fail(msg, requests[i].subject);
        if (err) errors.push({ i, e: err });
      }
    }
    return errors.sort((a, b) => a.i - b.i).map((x) => x.e);
  }
}
