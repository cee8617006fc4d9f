/**
 * nf_tables expressions: the steps a rule is made of (load a header field or a meta/ct key
 * into a register, compare it, look it up in a set, mask it, set a mark, NAT), encoded into a
 * rule's expression list, and decoded back to a short text for listings.
 *
 * Registers are the 16-byte NFT_REG_1…NFT_REG_4 (the kernel lists them as it was given
 * them); NFT_REG_VERDICT is 0. Values compared with a header field are in network byte order;
 * marks and interface indexes are in host order, as the kernel holds them.
 *
 * @module
 */
import { getString, type MessageBuilder, parseAttrs } from "./codec.ts";
import { be32, getBe32, NFT_VERDICT } from "./nft_batch.ts";
import { listElems } from "./nft_set.ts";
import { InvalidInputError } from "./errors.ts";

/** The first general-purpose register. */
export const NFT_REG_1 = 1;

/** conntrack state bits as `ct state` sees them (NF_CT_STATE_BIT). */
export const CT_STATE = { invalid: 1, established: 2, related: 4, new: 8, untracked: 64 } as const;

/** NF_NAT_RANGE_PROTO_RANDOM_FULLY: the source port is chosen at random for every connection. */
export const NF_NAT_RANGE_PROTO_RANDOM_FULLY = 16;

/** meta keys vpcni uses. */
export const META_KEY = { mark: 3, iif: 4, oif: 5 } as const;
/** ct keys vpcni uses. */
export const CT_KEY = { state: 0, mark: 3 } as const;
/** Header bases of a payload load. */
export const PAYLOAD_BASE = { link: 0, network: 1, transport: 2 } as const;

/** One expression of a rule. */
export type NftExpr =
  | {
    type: "payload";
    base: keyof typeof PAYLOAD_BASE;
    offset: number;
    len: number;
    dreg: number;
  }
  | { type: "cmp"; op: "eq" | "neq"; sreg: number; data: Uint8Array }
  | { type: "lookup"; set: string; setId?: number; sreg: number; invert?: boolean }
  | { type: "meta"; key: keyof typeof META_KEY; dreg: number }
  | { type: "metaSet"; key: "mark"; sreg: number }
  | { type: "ct"; key: keyof typeof CT_KEY; dreg: number }
  | { type: "ctSet"; key: "mark"; sreg: number }
  | { type: "bitwise"; sreg: number; dreg: number; mask: Uint8Array; xor: Uint8Array }
  | { type: "immediate"; dreg: number; data: Uint8Array }
  | { type: "verdict"; code: number }
  | { type: "snat"; addrReg: number; flags: number }
  | { type: "masq"; flags: number }
  | { type: "counter" };

const NFTA_LIST_ELEM = 1;
const NFTA_EXPR_NAME = 1;
const NFTA_EXPR_DATA = 2;
const NFTA_DATA_VALUE = 1;
const NFTA_DATA_VERDICT = 2;
const NFTA_VERDICT_CODE = 1;
const NFT_CMP_EQ = 0;
const NFT_CMP_NEQ = 1;
const NFT_LOOKUP_F_INV = 1;
const NFT_NAT_SNAT = 0;
const NFPROTO_IPV4 = 2;

/** A u32 in host order, as a mark or an interface index sits in a register. */
export function hostU32(v: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v >>> 0, true);
  return b;
}

function checkReg(r: number, what: string): number {
  if (!Number.isInteger(r) || r < 1 || r > 4) {
    throw new InvalidInputError(`${what}: register must be NFT_REG_1…NFT_REG_4, got ${r}`);
  }
  return r;
}

function dataNest(b: MessageBuilder, type: number, value: Uint8Array): void {
  const n = b.beginNest(type);
  b.attr(NFTA_DATA_VALUE, value);
  b.endNest(n);
}

/** The kernel's name of an expression. */
function kernelName(e: NftExpr): string {
  switch (e.type) {
    case "metaSet":
      return "meta";
    case "ctSet":
      return "ct";
    case "verdict":
      return "immediate";
    case "snat":
      return "nat";
    default:
      return e.type;
  }
}

function encodeData(b: MessageBuilder, e: NftExpr): void {
  switch (e.type) {
    case "payload":
      b.attr(1, be32(checkReg(e.dreg, "payload")));
      b.attr(2, be32(PAYLOAD_BASE[e.base]));
      b.attr(3, be32(e.offset));
      b.attr(4, be32(e.len));
      return;
    case "cmp":
      b.attr(1, be32(checkReg(e.sreg, "cmp")));
      b.attr(2, be32(e.op === "eq" ? NFT_CMP_EQ : NFT_CMP_NEQ));
      dataNest(b, 3, e.data);
      return;
    case "lookup":
      b.attrString(1, e.set);
      b.attr(2, be32(checkReg(e.sreg, "lookup")));
      if (e.setId !== undefined) b.attr(4, be32(e.setId));
      if (e.invert) b.attr(5, be32(NFT_LOOKUP_F_INV));
      return;
    case "meta":
      b.attr(1, be32(checkReg(e.dreg, "meta")));
      b.attr(2, be32(META_KEY[e.key]));
      return;
    case "metaSet":
      b.attr(2, be32(META_KEY[e.key]));
      b.attr(3, be32(checkReg(e.sreg, "meta set")));
      return;
    case "ct":
      b.attr(1, be32(checkReg(e.dreg, "ct")));
      b.attr(2, be32(CT_KEY[e.key]));
      return;
    case "ctSet":
      b.attr(2, be32(CT_KEY[e.key]));
      b.attr(4, be32(checkReg(e.sreg, "ct set")));
      return;
    case "bitwise":
      if (e.mask.length !== e.xor.length || e.mask.length === 0) {
        throw new InvalidInputError("bitwise: mask and xor must be the same, non-zero length");
      }
      b.attr(1, be32(checkReg(e.sreg, "bitwise")));
      b.attr(2, be32(checkReg(e.dreg, "bitwise")));
      b.attr(3, be32(e.mask.length));
      dataNest(b, 4, e.mask);
      dataNest(b, 5, e.xor);
      return;
    case "immediate":
      b.attr(1, be32(checkReg(e.dreg, "immediate")));
      dataNest(b, 2, e.data);
      return;
    case "verdict": {
      b.attr(1, be32(0));
      const d = b.beginNest(2);
      const v = b.beginNest(NFTA_DATA_VERDICT);
      b.attr(NFTA_VERDICT_CODE, be32(e.code));
      b.endNest(v);
      b.endNest(d);
      return;
    }
    case "snat":
      b.attr(1, be32(NFT_NAT_SNAT));
      b.attr(2, be32(NFPROTO_IPV4));
      b.attr(3, be32(checkReg(e.addrReg, "snat")));
      if (e.flags) b.attr(7, be32(e.flags));
      return;
    case "masq":
      if (e.flags) b.attr(1, be32(e.flags));
      return;
    case "counter":
      return;
  }
}

/** Appends `exprs` as the list nested in attribute `type` (NFTA_RULE_EXPRESSIONS). */
export function encodeExpressions(b: MessageBuilder, type: number, exprs: NftExpr[]): void {
  const list = b.beginNest(type);
  for (const e of exprs) {
    const el = b.beginNest(NFTA_LIST_ELEM);
    b.attrString(NFTA_EXPR_NAME, kernelName(e));
    const data = b.beginNest(NFTA_EXPR_DATA);
    encodeData(b, e);
    b.endNest(data);
    b.endNest(el);
  }
  b.endNest(list);
}

function hex(b: Uint8Array | undefined): string {
  return b ? [...b].map((x) => x.toString(16).padStart(2, "0")).join("") : "";
}

function dataValue(nest: Uint8Array | undefined): Uint8Array | undefined {
  return nest ? parseAttrs(nest).get(NFTA_DATA_VALUE) : undefined;
}

const VERDICT_NAMES = Object.fromEntries(
  Object.entries(NFT_VERDICT).map(([k, v]) => [v, k.toLowerCase()]),
);

/**
 * Decodes a rule's expression list into one short text per expression, e.g.
 * `payload network +16/4 → r1`, `lookup r1 in @vpc`, `nat snat r1 flags 0x10`.
 */
export function describeExpressions(list: Uint8Array): string[] {
  return listElems(list).map((el) => {
    const a = parseAttrs(el);
    const name = getString(a.get(NFTA_EXPR_NAME) ?? new Uint8Array());
    const d = parseAttrs(a.get(NFTA_EXPR_DATA) ?? new Uint8Array());
    const u = (t: number) => d.has(t) ? getBe32(d.get(t)!) : undefined;
    switch (name) {
      case "payload":
        return `payload base ${u(2)} +${u(3)}/${u(4)} → r${u(1)}`;
      case "cmp":
        return `cmp r${u(1)} ${u(2) === NFT_CMP_EQ ? "==" : `op${u(2)}`} ${
          hex(dataValue(d.get(3)))
        }`.replace(" op1 ", " != ");
      case "lookup":
        return `lookup r${u(2)} ${u(5) ? "not in" : "in"} @${getString(d.get(1)!)}`;
      case "meta":
        return d.has(3) ? `meta key ${u(2)} set from r${u(3)}` : `meta key ${u(2)} → r${u(1)}`;
      case "ct":
        return d.has(4) ? `ct key ${u(2)} set from r${u(4)}` : `ct key ${u(2)} → r${u(1)}`;
      case "bitwise":
        return `bitwise r${u(1)} & ${hex(dataValue(d.get(4)))} ^ ${hex(dataValue(d.get(5)))} → r${
          u(2)
        }`;
      case "immediate": {
        const data = parseAttrs(d.get(2) ?? new Uint8Array());
        const verdict = data.get(NFTA_DATA_VERDICT);
        if (verdict) {
          const code = parseAttrs(verdict).get(NFTA_VERDICT_CODE);
          const c = code ? new DataView(code.slice().buffer).getInt32(0, false) : 0;
          return `verdict ${VERDICT_NAMES[c] ?? c}`;
        }
        return `immediate ${hex(data.get(NFTA_DATA_VALUE))} → r${u(1)}`;
      }
      case "nat":
        return `nat ${u(1) === NFT_NAT_SNAT ? "snat" : "dnat"} r${u(3)} flags 0x${
          (u(7) ?? 0).toString(16)
        }`;
      case "masq":
        return `masq flags 0x${(u(1) ?? 0).toString(16)}`;
      default:
        return name;
    }
  });
}
