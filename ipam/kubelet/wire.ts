/**
 * The protocol-buffers wire format, as much of it as the kubelet's device-plugin and
 * pod-resources messages use: varints (bool, int32, int64, uint64), length-delimited fields
 * (string, bytes, nested messages, packed repeated varints) and the skipping of fixed-width
 * fields a newer kubelet may add. Proto3 semantics: a field at its default is not written;
 * unknown fields are skipped on reading.
 *
 * @module
 */

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Wire types of the format. */
const VARINT = 0;
const FIXED64 = 1;
const LEN = 2;
const FIXED32 = 5;

/** A message that cannot be read: truncated, or a wire type the format does not have. */
export class WireError extends Error {
  /** Builds the error. */
  constructor(message: string) {
    super(message);
    this.name = "WireError";
  }
}

/** Builds one message, field by field. */
export class MessageWriter {
  #parts: number[] = [];

  #varint(n: number | bigint): void {
    let v = BigInt.asUintN(64, BigInt(n));
    while (v >= 0x80n) {
      this.#parts.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.#parts.push(Number(v));
  }

  #tag(field: number, wire: number): void {
    this.#varint((field << 3) | wire);
  }

  /** A string field (skipped when empty). */
  string(field: number, s: string | undefined): this {
    if (s) this.bytes(field, utf8.encode(s));
    return this;
  }

  /** Each string of a repeated string field. */
  strings(field: number, list: readonly string[] | undefined): this {
    for (const s of list ?? []) {
      this.#tag(field, LEN);
      const b = utf8.encode(s);
      this.#varint(b.length);
      for (const x of b) this.#parts.push(x);
    }
    return this;
  }

  /** A bytes field (skipped when empty). */
  bytes(field: number, b: Uint8Array): this {
    if (b.length === 0) return this;
    this.#tag(field, LEN);
    this.#varint(b.length);
    for (const x of b) this.#parts.push(x);
    return this;
  }

  /** A nested message, written even when empty (presence matters for message fields). */
  message(field: number, b: Uint8Array): this {
    this.#tag(field, LEN);
    this.#varint(b.length);
    for (const x of b) this.#parts.push(x);
    return this;
  }

  /** A bool field (skipped when false). */
  bool(field: number, b: boolean | undefined): this {
    if (b) {
      this.#tag(field, VARINT);
      this.#varint(1);
    }
    return this;
  }

  /** An integer field of a varint type (skipped when 0); negatives as int64 two's complement. */
  int(field: number, n: number | bigint | undefined): this {
    if (n !== undefined && n !== 0 && n !== 0n) {
      this.#tag(field, VARINT);
      this.#varint(n);
    }
    return this;
  }

  /** The encoded message. */
  finish(): Uint8Array {
    return Uint8Array.from(this.#parts);
  }
}

/** One field read off the wire: a varint's value, or a length-delimited field's bytes. */
export type WireField =
  | { field: number; kind: "varint"; value: bigint }
  | { field: number; kind: "bytes"; value: Uint8Array };

/** Reads every field of a message, in order (fixed-width fields are skipped). */
export function readFields(buf: Uint8Array): WireField[] {
  const out: WireField[] = [];
  let i = 0;
  const varint = (): bigint => {
    let v = 0n;
    let shift = 0n;
    for (;;) {
      if (i >= buf.length) throw new WireError("truncated varint");
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return v;
      shift += 7n;
      if (shift > 63n) throw new WireError("varint longer than 10 bytes");
    }
  };
  while (i < buf.length) {
    const key = varint();
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (field === 0) throw new WireError("field number 0");
    switch (wire) {
      case VARINT:
        out.push({ field, kind: "varint", value: varint() });
        break;
      case LEN: {
        const n = Number(varint());
        if (i + n > buf.length) throw new WireError(`field ${field}: truncated`);
        out.push({ field, kind: "bytes", value: buf.subarray(i, i + n) });
        i += n;
        break;
      }
      case FIXED64:
        i += 8;
        break;
      case FIXED32:
        i += 4;
        break;
      default:
        throw new WireError(`field ${field}: unsupported wire type ${wire}`);
    }
    if (i > buf.length) throw new WireError("truncated fixed-width field");
  }
  return out;
}

/** Text of a length-delimited field. */
export function text(f: WireField): string {
  if (f.kind !== "bytes") throw new WireError(`field ${f.field}: expected a string`);
  return fromUtf8.decode(f.value);
}

/** Bytes of a length-delimited field (a nested message). */
export function nested(f: WireField): Uint8Array {
  if (f.kind !== "bytes") throw new WireError(`field ${f.field}: expected a message`);
  return f.value;
}

/** The value of a varint field as a number (int64 values are read as signed). */
export function num(f: WireField): number {
  if (f.kind !== "varint") throw new WireError(`field ${f.field}: expected a varint`);
  return Number(BigInt.asIntN(64, f.value));
}

/** The values of a repeated varint field, packed or not. */
export function nums(f: WireField): number[] {
  if (f.kind === "varint") return [num(f)];
  return readPackedVarints(f.value);
}

function readPackedVarints(b: Uint8Array): number[] {
  const out: number[] = [];
  let v = 0n;
  let shift = 0n;
  for (const byte of b) {
    v |= BigInt(byte & 0x7f) << shift;
    if (byte & 0x80) {
      shift += 7n;
      continue;
    }
    out.push(Number(BigInt.asIntN(64, v)));
    v = 0n;
    shift = 0n;
  }
  if (shift !== 0n) throw new WireError("truncated packed varint");
  return out;
}
