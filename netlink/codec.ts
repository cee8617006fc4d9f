/**
 * The netlink wire format: `nlmsghdr`, `rtattr` (with nesting), multipart dumps and the
 * kernel's error/ack messages with extended-ack attributes. Pure code, no syscalls.
 *
 * All integers are host byte order (little-endian on every platform vpcni targets).
 *
 * @module
 */

/** Size of `struct nlmsghdr`. */
export const NLMSG_HDRLEN = 16;
/** An error or, with error 0, an ack (a message type shared by every netlink family). */
export const NLMSG_ERROR = 2;
/** End of a multipart dump. */
export const NLMSG_DONE = 3;

/** nlmsg_flags */
export const NLM_F_REQUEST = 0x1;
/** Part of a multipart message. */
export const NLM_F_MULTI = 0x2;
/** Ask for an ack. */
export const NLM_F_ACK = 0x4;
/** The dump was interrupted by a change; its content may be inconsistent. */
export const NLM_F_DUMP_INTR = 0x10;
/** GET: the whole table. */
export const NLM_F_DUMP = 0x300;
/** NEW: replace an existing object. */
export const NLM_F_REPLACE = 0x100;
/** NEW: fail if the object exists. */
export const NLM_F_EXCL = 0x200;
/** NEW: create if missing. */
export const NLM_F_CREATE = 0x400;
/** On an NLMSG_ERROR: the echoed request was capped to its header. */
export const NLM_F_CAPPED = 0x100;
/** On an NLMSG_ERROR: extended-ack attributes follow. */
export const NLM_F_ACK_TLVS = 0x200;

/** Extended-ack attribute: human-readable message. */
export const NLMSGERR_ATTR_MSG = 1;
/** Extended-ack attribute: offset of the offending attribute in the request. */
export const NLMSGERR_ATTR_OFFS = 2;

/** rtattr/nlattr flag bits that are not part of the type. */
export const NLA_F_NESTED = 0x8000;
const NLA_TYPE_MASK = 0x3fff;

/** rtnetlink message types. */
export const RTM = {
  NEWLINK: 16,
  DELLINK: 17,
  GETLINK: 18,
  SETLINK: 19,
  NEWADDR: 20,
  DELADDR: 21,
  GETADDR: 22,
  NEWROUTE: 24,
  DELROUTE: 25,
  GETROUTE: 26,
  NEWNEIGH: 28,
  DELNEIGH: 29,
  GETNEIGH: 30,
  NEWRULE: 32,
  DELRULE: 33,
  GETRULE: 34,
} as const;

const RTM_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(RTM).map(([k, v]) => [v, `RTM_${k}`]),
);

/**
 * Adds names for another netlink family's message types (nf_tables registers its own), so
 * errors read `NFT_MSG_NEWRULE …` rather than a number.
 */
export function nameMessageTypes(names: Record<number, string>): void {
  Object.assign(RTM_NAMES, names);
}

/** The name of a message type, e.g. 16 → "RTM_NEWLINK". */
export function messageTypeName(type: number): string {
  return RTM_NAMES[type] ?? `message type ${type}`;
}

/** Rounds up to the 4-byte netlink alignment. */
export function align4(n: number): number {
  return (n + 3) & ~3;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Builds one netlink request: header, fixed family header, then attributes (nested with
 * {@linkcode MessageBuilder.beginNest}). Grows its buffer as needed.
 */
export class MessageBuilder {
  private buf: Uint8Array;
  private view: DataView;
  private len = NLMSG_HDRLEN;

  /** Starts a message of `type` with `flags` (NLM_F_REQUEST is always added). */
  constructor(type: number, flags: number, capacity = 256) {
    this.buf = new Uint8Array(Math.max(capacity, NLMSG_HDRLEN));
    this.view = new DataView(this.buf.buffer);
    this.view.setUint16(4, type, true);
    this.view.setUint16(6, flags | NLM_F_REQUEST, true);
  }

  /** Bytes written so far (header included). */
  get length(): number {
    return this.len;
  }

  /** Makes room for `n` more bytes and returns where they start. */
  private reserve(n: number): number {
    const need = this.len + n;
    if (need > this.buf.length) {
      const next = new Uint8Array(Math.max(need, this.buf.length * 2));
      next.set(this.buf.subarray(0, this.len));
      this.buf = next;
      this.view = new DataView(next.buffer);
    }
    const at = this.len;
    this.len = need;
    return at;
  }

  /** Appends a u8. */
  u8(v: number): this {
    const at = this.reserve(1);
    this.view.setUint8(at, v);
    return this;
  }
  /** Appends a u16. */
  u16(v: number): this {
    const at = this.reserve(2);
    this.view.setUint16(at, v, true);
    return this;
  }
  /** Appends a u32. */
  u32(v: number): this {
    const at = this.reserve(4);
    this.view.setUint32(at, v >>> 0, true);
    return this;
  }
  /** Appends an i32. */
  i32(v: number): this {
    const at = this.reserve(4);
    this.view.setInt32(at, v, true);
    return this;
  }
  /** Appends raw bytes, then pads to 4. */
  bytes(b: Uint8Array): this {
    const at = this.reserve(b.length);
    this.buf.set(b, at);
    this.pad();
    return this;
  }
  /** Pads to the 4-byte boundary with zeroes. */
  pad(): this {
    const p = align4(this.len) - this.len;
    if (p > 0) {
      const at = this.reserve(p);
      this.buf.fill(0, at, this.len);
    }
    return this;
  }

  /** Appends the header of an attribute whose `payloadLen`-byte payload follows. */
  private attrHeader(type: number, payloadLen: number): void {
    const at = this.reserve(4);
    this.view.setUint16(at, 4 + payloadLen, true);
    this.view.setUint16(at + 2, type, true);
  }
  /** Appends an integer attribute of `size` bytes (1, 2 or 4), padded to 4 with zeroes. */
  private attrInt(type: number, size: number, v: number): this {
    this.attrHeader(type, size);
    const at = this.reserve(4); // before reading this.view: reserve may replace it
    this.view.setUint32(at, v, true);
    return this;
  }

  /** Appends an attribute with a raw payload. */
  attr(type: number, payload: Uint8Array): this {
    this.attrHeader(type, payload.length);
    const at = this.reserve(payload.length); // before reading this.buf: reserve may replace it
    this.buf.set(payload, at);
    return this.pad();
  }
  /** Appends a u8 attribute. */
  attrU8(type: number, v: number): this {
    return this.attrInt(type, 1, v & 0xff);
  }
  /** Appends a u16 attribute. */
  attrU16(type: number, v: number): this {
    return this.attrInt(type, 2, v & 0xffff);
  }
  /** Appends a u32 attribute. */
  attrU32(type: number, v: number): this {
    return this.attrInt(type, 4, v >>> 0);
  }
  /** Appends a NUL-terminated string attribute. */
  attrString(type: number, s: string): this {
    const b = encoder.encode(s);
    this.attrHeader(type, b.length + 1);
    const p = this.reserve(b.length + 1);
    this.buf.set(b, p);
    this.buf[p + b.length] = 0;
    return this.pad();
  }
  /** Opens a nested attribute; close it with {@linkcode MessageBuilder.endNest}. */
  beginNest(type: number): number {
    const at = this.reserve(4);
    this.view.setUint16(at + 2, type | NLA_F_NESTED, true);
    return at;
  }
  /** Closes the nested attribute opened at `at`. */
  endNest(at: number): this {
    this.view.setUint16(at, this.len - at, true);
    return this;
  }
  /** Opens a nested attribute without NLA_F_NESTED (veth's peer info is parsed that way). */
  beginPlainNest(type: number): number {
    const at = this.reserve(4);
    this.view.setUint16(at + 2, type, true);
    return at;
  }

  /** Finishes the message with `seq` and returns a view of its bytes. */
  finish(seq: number): Uint8Array {
    this.view.setUint32(0, this.len, true);
    this.view.setUint32(8, seq >>> 0, true);
    this.view.setUint32(12, 0, true);
    return this.buf.subarray(0, this.len);
  }
}

/** One received netlink message; `data` is the payload after the 16-byte header. */
export interface NetlinkMessage {
  /** nlmsg_type */
  type: number;
  /** nlmsg_flags */
  flags: number;
  /** nlmsg_seq */
  seq: number;
  /** nlmsg_pid */
  pid: number;
  /** The payload (a view: copy what must outlive the receive buffer). */
  data: Uint8Array;
}

/** Splits a received datagram into messages. Throws on a truncated or malformed one. */
export function parseMessages(buf: Uint8Array): NetlinkMessage[] {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const out: NetlinkMessage[] = [];
  let off = 0;
  while (off + NLMSG_HDRLEN <= buf.length) {
    const len = view.getUint32(off, true);
    if (len < NLMSG_HDRLEN || off + len > buf.length) {
      throw new Error(`malformed netlink message: length ${len} at offset ${off}`);
    }
    out.push({
      type: view.getUint16(off + 4, true),
      flags: view.getUint16(off + 6, true),
      seq: view.getUint32(off + 8, true),
      pid: view.getUint32(off + 12, true),
      data: buf.subarray(off + NLMSG_HDRLEN, off + len),
    });
    off += align4(len);
  }
  return out;
}

/** Attributes by type (flag bits stripped). A repeated type keeps its last value. */
export type Attrs = Map<number, Uint8Array>;

/** Parses the attributes in `data` starting at `offset` (after a family header). */
export function parseAttrs(data: Uint8Array, offset = 0): Attrs {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const attrs: Attrs = new Map();
  let off = offset;
  while (off + 4 <= data.length) {
    const len = view.getUint16(off, true);
    if (len < 4 || off + len > data.length) break;
    const type = view.getUint16(off + 2, true) & NLA_TYPE_MASK;
    attrs.set(type, data.subarray(off + 4, off + len));
    off += align4(len);
  }
  return attrs;
}

/** Reads a u8 attribute payload. */
export function getU8(b: Uint8Array): number {
  return b[0];
}
/** Reads a u16 attribute payload. */
export function getU16(b: Uint8Array): number {
  return b[0] | (b[1] << 8);
}
/** Reads a u32 attribute payload. */
export function getU32(b: Uint8Array): number {
  return (b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)) >>> 0;
}
/** Reads a (possibly NUL-terminated) string attribute payload. */
export function getString(b: Uint8Array): string {
  const nul = b.indexOf(0);
  return decoder.decode(nul >= 0 ? b.subarray(0, nul) : b);
}

/** What an NLMSG_ERROR carried: errno 0 is an ack. */
export interface ErrorPayload {
  /** Positive errno, or 0 for an ack. */
  errno: number;
  /** Type of the request it answers. */
  requestType: number;
  /** Sequence number of the request it answers. */
  requestSeq: number;
  /** Extended-ack message text, when the kernel sent one. */
  extack?: string;
}

/** Decodes the payload of an NLMSG_ERROR message (ack or error, with extended ack). */
export function parseErrorMessage(msg: NetlinkMessage): ErrorPayload {
  const d = msg.data;
  if (d.length < 4 + NLMSG_HDRLEN) throw new Error("truncated NLMSG_ERROR");
  const view = new DataView(d.buffer, d.byteOffset, d.byteLength);
  const err = view.getInt32(0, true);
  const origLen = view.getUint32(4, true);
  const out: ErrorPayload = {
    errno: err === 0 ? 0 : -err,
    requestType: view.getUint16(8, true),
    requestSeq: view.getUint32(12, true),
  };
  if (msg.flags & NLM_F_ACK_TLVS) {
    const echoed = msg.flags & NLM_F_CAPPED ? NLMSG_HDRLEN : origLen;
    const attrs = parseAttrs(d, 4 + align4(echoed));
    const text = attrs.get(NLMSGERR_ATTR_MSG);
    if (text && text.length > 0) out.extack = getString(text);
  }
  return out;
}
