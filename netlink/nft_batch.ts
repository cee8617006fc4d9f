/**
 * nf_tables over NETLINK_NETFILTER: the message header (`nfgenmsg`), the message types, the
 * big-endian attribute helpers nf_tables uses, and the atomic transaction (batch begin, the
 * requests, batch end) every change goes through.
 *
 * Numbers are the kernel's uapi (linux/netfilter/nfnetlink.h, nf_tables.h).
 *
 * @module
 */
import {
  MessageBuilder,
  nameMessageTypes,
  type NetlinkMessage,
  NLM_F_DUMP,
  parseAttrs,
} from "./codec.ts";
import { NetlinkSocket } from "./socket.ts";
import type { BatchRequest } from "./socket.ts";

/** The netlink protocol of netfilter. */
export const NETLINK_NETFILTER = 12;
/** The nfnetlink subsystem id of nf_tables (the high byte of every message type). */
export const NFNL_SUBSYS_NFTABLES = 10;
/** Opens a transaction (`res_id` names the subsystem). */
export const NFNL_MSG_BATCH_BEGIN = 0x10;
/** Commits a transaction. */
export const NFNL_MSG_BATCH_END = 0x11;
/** nfgen_family of the `ip` family (NFPROTO_IPV4). */
export const NFPROTO_IPV4 = 2;

/** nf_tables message types (the low byte). */
export const NFT_MSG = {
  NEWTABLE: 0,
  GETTABLE: 1,
  DELTABLE: 2,
  NEWCHAIN: 3,
  GETCHAIN: 4,
  DELCHAIN: 5,
  NEWRULE: 6,
  GETRULE: 7,
  DELRULE: 8,
  NEWSET: 9,
  GETSET: 10,
  DELSET: 11,
  NEWSETELEM: 12,
  GETSETELEM: 13,
  DELSETELEM: 14,
  NEWGEN: 15,
  GETGEN: 16,
} as const;

nameMessageTypes(
  Object.fromEntries(
    Object.entries(NFT_MSG).map(([k, v]) => [(NFNL_SUBSYS_NFTABLES << 8) | v, `NFT_MSG_${k}`]),
  ),
);

/** Verdict codes (NF_ACCEPT, NF_DROP and nf_tables' own negative ones). */
export const NFT_VERDICT = {
  DROP: 0,
  ACCEPT: 1,
  CONTINUE: -1,
  BREAK: -2,
  JUMP: -3,
  GOTO: -4,
  RETURN: -5,
} as const;

/** Netfilter hooks of the ip family. */
export const NF_INET_HOOK = {
  prerouting: 0,
  input: 1,
  forward: 2,
  output: 3,
  postrouting: 4,
} as const;

/** A hook's name. */
export type HookName = keyof typeof NF_INET_HOOK;

/** The nf_tables message type of `msg` as it goes on the wire. */
export function nftType(msg: number): number {
  return (NFNL_SUBSYS_NFTABLES << 8) | msg;
}

/** A u32 in network byte order, as nf_tables attributes carry them. */
export function be32(v: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v >>> 0, false);
  return b;
}

/** A u64 in network byte order (rule and set handles). */
export function be64(v: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, v, false);
  return b;
}

/** Reads a big-endian u32 attribute. */
export function getBe32(b: Uint8Array): number {
  return new DataView(b.buffer, b.byteOffset, 4).getUint32(0, false);
}

/** Reads a big-endian u64 attribute. */
export function getBe64(b: Uint8Array): bigint {
  return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, false);
}

/** Starts an nf_tables message: header plus `nfgenmsg` (family, version 0, res_id). */
export function nftMessage(msg: number, flags: number, family = NFPROTO_IPV4): MessageBuilder {
  return new MessageBuilder(nftType(msg), flags).u8(family).u8(0).u16(0);
}

/** A GET of a whole object list (tables, chains, rules, sets) of the ip family. */
export function nftDumpRequest(msg: number): MessageBuilder {
  return nftMessage(msg, NLM_F_DUMP);
}

/** Size of `struct nfgenmsg`: attributes of a received message start after it. */
export const NFGENMSG_LEN = 4;

/** The attributes of a received nf_tables message, with the message type's low byte. */
export function nftAttrs(m: NetlinkMessage): { msg: number; attrs: Map<number, Uint8Array> } {
  return { msg: m.type & 0xff, attrs: parseAttrs(m.data, NFGENMSG_LEN) };
}

/** Opens a NETLINK_NETFILTER socket here, or in the netns at `netnsPath`. */
export function openNftSocket(netnsPath?: string): NetlinkSocket {
  return netnsPath
    ? NetlinkSocket.openIn(netnsPath, NETLINK_NETFILTER)
    : NetlinkSocket.open(NETLINK_NETFILTER);
}

function batchMarker(type: number): MessageBuilder {
  // res_id is the subsystem, in network byte order.
  return new MessageBuilder(type, 0).u8(0).u8(0).u8(0).u8(NFNL_SUBSYS_NFTABLES);
}

/**
 * Commits `requests` as one nf_tables transaction: the kernel applies all of them or none.
 * Throws the first request's error (its `subject` names it).
 */
export function commitTransaction(s: NetlinkSocket, requests: BatchRequest[]): void {
  if (requests.length === 0) return;
  s.transaction(
    batchMarker(NFNL_MSG_BATCH_BEGIN),
    requests,
    batchMarker(NFNL_MSG_BATCH_END),
    nftMessage(NFT_MSG.GETGEN, 0),
  );
}

/** The ruleset's generation id (it changes with every committed transaction). */
export function rulesetGeneration(s: NetlinkSocket): number {
  const NFTA_GEN_ID = 1;
  return s.get(nftMessage(NFT_MSG.GETGEN, 0), (m) => {
    const v = nftAttrs(m).attrs.get(NFTA_GEN_ID);
    return v ? getBe32(v) : 0;
  }, "ruleset generation");
}
