/**
 * nf_tables sets of IPv4 addresses with the interval flag: a set holds CIDR blocks (kept as
 * merged address ranges), a rule's lookup expression asks whether an address is in one.
 *
 * An interval set holds each range as two elements: its first address, and the address after
 * its last marked "interval end" (none when the range runs to 255.255.255.255).
 *
 * @module
 */
import { getString, type NetlinkMessage, NLM_F_CREATE, NLM_F_DUMP, parseAttrs } from "./codec.ts";
import type { BatchRequest, NetlinkSocket } from "./socket.ts";
import { be32, getBe32, NFT_MSG, nftAttrs, nftDumpRequest, nftMessage } from "./nft_batch.ts";
import { checkNftName } from "./nft_table.ts";
import { InvalidInputError } from "./errors.ts";
import { formatIpv4, type Ipv4Cidr, parseIpv4Cidr, prefixMask } from "../base/ipv4.ts";

const NFTA_SET_TABLE = 1;
const NFTA_SET_NAME = 2;
const NFTA_SET_FLAGS = 3;
const NFTA_SET_KEY_TYPE = 4;
const NFTA_SET_KEY_LEN = 5;
const NFTA_SET_ID = 10;
const NFTA_SET_ELEM_LIST_TABLE = 1;
const NFTA_SET_ELEM_LIST_SET = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS = 3;
const NFTA_SET_ELEM_LIST_SET_ID = 4;
const NFTA_SET_ELEM_KEY = 1;
const NFTA_SET_ELEM_FLAGS = 3;
const NFTA_DATA_VALUE = 1;
const NFTA_LIST_ELEM = 1;
/** NFT_SET_INTERVAL */
const SET_F_INTERVAL = 0x4;
/** NFT_SET_ELEM_INTERVAL_END */
const ELEM_F_INTERVAL_END = 0x1;
/** The key type nft prints as `ipv4_addr` (userspace's datatype number; the kernel stores it). */
const TYPE_IPADDR = 7;

/** A half-open range of IPv4 addresses [start, end), `end` up to 2^32. */
export interface AddressRange {
  start: number;
  end: number;
}

/** An IPv4 interval set to create. */
export interface NftSetSpec {
  table: string;
  name: string;
  /** Blocks in the set ("a.b.c.d/len" or a bare address); overlaps are merged. */
  cidrs: string[];
  /**
   * A number unique in the transaction, so rules added in the same transaction can name the
   * set before it exists.
   */
  id: number;
}

/** A set as the kernel lists it. */
export interface NftSet {
  table: string;
  name: string;
  flags: number;
  keyType: number;
  keyLen: number;
}

/** Parses and merges CIDR blocks into sorted, disjoint, non-adjacent ranges. */
export function cidrsToRanges(cidrs: string[], what = "set element"): AddressRange[] {
  const ranges = cidrs.map((text) => {
    const c = typeof text === "string" ? parseIpv4Cidr(text) : undefined;
    if (!c) throw new InvalidInputError(`${what}: "${text}" is not an IPv4 address or CIDR`);
    const start = (c.address & prefixMask(c.prefixLen)) >>> 0;
    return { start, end: start + 2 ** (32 - c.prefixLen) };
  }).sort((a, b) => a.start - b.start);
  const out: AddressRange[] = [];
  for (const r of ranges) {
    const last = out[out.length - 1];
    if (last && r.start <= last.end) last.end = Math.max(last.end, r.end);
    else out.push({ ...r });
  }
  return out;
}

/** The fewest CIDR blocks that cover a range exactly. */
export function rangeToCidrs(r: AddressRange): Ipv4Cidr[] {
  const out: Ipv4Cidr[] = [];
  let at = r.start;
  while (at < r.end) {
    let len = 32;
    while (len > 0) {
      const size = 2 ** (32 - (len - 1));
      if (at % size !== 0 || at + size > r.end) break;
      len--;
    }
    out.push({ address: at, prefixLen: len });
    at += 2 ** (32 - len);
  }
  return out;
}

/** Ranges as "a.b.c.d/len" blocks, in address order. */
export function rangesToCidrText(ranges: AddressRange[]): string[] {
  return ranges.flatMap(rangeToCidrs).map((c) => `${formatIpv4(c.address)}/${c.prefixLen}`);
}

function addrBytes(n: number): Uint8Array {
  return be32(n);
}

/** The transaction steps that create the set and fill it. */
export function newSetRequests(s: NftSetSpec): BatchRequest[] {
  checkNftName(s.table, "set table");
  checkNftName(s.name, "set");
  const ranges = cidrsToRanges(s.cidrs, `set ${s.name}`);
  const subject = `set ip ${s.table} ${s.name}`;
  const set = nftMessage(NFT_MSG.NEWSET, NLM_F_CREATE)
    .attrString(NFTA_SET_TABLE, s.table)
    .attrString(NFTA_SET_NAME, s.name)
    .attr(NFTA_SET_FLAGS, be32(SET_F_INTERVAL))
    .attr(NFTA_SET_KEY_TYPE, be32(TYPE_IPADDR))
    .attr(NFTA_SET_KEY_LEN, be32(4))
    .attr(NFTA_SET_ID, be32(s.id));
  const out: BatchRequest[] = [{ message: set, subject }];
  if (ranges.length === 0) return out;
  const el = nftMessage(NFT_MSG.NEWSETELEM, NLM_F_CREATE)
    .attrString(NFTA_SET_ELEM_LIST_TABLE, s.table)
    .attrString(NFTA_SET_ELEM_LIST_SET, s.name)
    .attr(NFTA_SET_ELEM_LIST_SET_ID, be32(s.id));
  const list = el.beginNest(NFTA_SET_ELEM_LIST_ELEMENTS);
  const element = (addr: number, flags: number) => {
    const e = el.beginNest(NFTA_LIST_ELEM);
    const k = el.beginNest(NFTA_SET_ELEM_KEY);
    el.attr(NFTA_DATA_VALUE, addrBytes(addr));
    el.endNest(k);
    if (flags) el.attr(NFTA_SET_ELEM_FLAGS, be32(flags));
    el.endNest(e);
  };
  for (const r of ranges) {
    element(r.start, 0);
    if (r.end < 2 ** 32) element(r.end, ELEM_F_INTERVAL_END);
  }
  el.endNest(list);
  out.push({ message: el, subject: `elements of ${subject}` });
  return out;
}

/** Decodes one NFT_MSG_NEWSET message. */
export function parseSet(m: NetlinkMessage): NftSet | undefined {
  const { msg, attrs } = nftAttrs(m);
  if (msg !== NFT_MSG.NEWSET) return undefined;
  const table = attrs.get(NFTA_SET_TABLE);
  const name = attrs.get(NFTA_SET_NAME);
  if (!table || !name) return undefined;
  const u = (t: number) => attrs.has(t) ? getBe32(attrs.get(t)!) : 0;
  return {
    table: getString(table),
    name: getString(name),
    flags: u(NFTA_SET_FLAGS),
    keyType: u(NFTA_SET_KEY_TYPE),
    keyLen: u(NFTA_SET_KEY_LEN),
  };
}

/** The sets of ip-family table `table`. */
export function listSets(s: NetlinkSocket, table: string): NftSet[] {
  const b = nftDumpRequest(NFT_MSG.GETSET).attrString(NFTA_SET_TABLE, table);
  return s.dump(b, (m) => {
    const set = parseSet(m);
    return set && set.table === table ? set : undefined;
  });
}

/** The ranges an IPv4 interval set holds, merged and in address order. */
export function listSetRanges(s: NetlinkSocket, table: string, set: string): AddressRange[] {
  const b = nftMessage(NFT_MSG.GETSETELEM, NLM_F_DUMP)
    .attrString(NFTA_SET_ELEM_LIST_TABLE, table)
    .attrString(NFTA_SET_ELEM_LIST_SET, set);
  const elements: { key: number; end: boolean }[] = [];
  s.dump(b, (m) => {
    const { msg, attrs } = nftAttrs(m);
    if (msg !== NFT_MSG.NEWSETELEM) return undefined;
    const list = attrs.get(NFTA_SET_ELEM_LIST_ELEMENTS);
    if (!list) return undefined;
    for (const e of listElems(list)) {
      const a = parseAttrs(e);
      const key = a.get(NFTA_SET_ELEM_KEY);
      const value = key ? parseAttrs(key).get(NFTA_DATA_VALUE) : undefined;
      if (!value || value.length !== 4) continue;
      const flags = a.has(NFTA_SET_ELEM_FLAGS) ? getBe32(a.get(NFTA_SET_ELEM_FLAGS)!) : 0;
      elements.push({ key: getBe32(value), end: (flags & ELEM_F_INTERVAL_END) !== 0 });
    }
    return undefined;
  });
  elements.sort((a, b) => a.key - b.key || (a.end ? -1 : 1));
  const out: AddressRange[] = [];
  let open: number | undefined;
  for (const e of elements) {
    if (!e.end) {
      if (open !== undefined) out.push({ start: open, end: e.key });
      open = e.key;
    } else if (open !== undefined) {
      out.push({ start: open, end: e.key });
      open = undefined;
    }
  }
  if (open !== undefined) out.push({ start: open, end: 2 ** 32 });
  return cidrsToRanges(rangesToCidrText(out));
}

/** The payloads of each NFTA_LIST_ELEM in a nested list. */
export function listElems(nest: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  const view = new DataView(nest.buffer, nest.byteOffset, nest.byteLength);
  let off = 0;
  while (off + 4 <= nest.length) {
    const len = view.getUint16(off, true);
    if (len < 4 || off + len > nest.length) break;
    if ((view.getUint16(off + 2, true) & 0x3fff) === NFTA_LIST_ELEM) {
      out.push(nest.subarray(off + 4, off + len));
    }
    off += (len + 3) & ~3;
  }
  return out;
}
