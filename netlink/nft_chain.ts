/**
 * nf_tables chains: base chains (attached to a netfilter hook, of type filter, nat or route,
 * at a priority) and their listing.
 *
 * @module
 */
import { getString, type NetlinkMessage, NLM_F_CREATE, parseAttrs } from "./codec.ts";
import type { BatchRequest, NetlinkSocket } from "./socket.ts";
import {
  be32,
  getBe32,
  type HookName,
  NF_INET_HOOK,
  NFT_MSG,
  NFT_VERDICT,
  nftAttrs,
  nftDumpRequest,
  nftMessage,
} from "./nft_batch.ts";
import { checkNftName } from "./nft_table.ts";
import { InvalidInputError } from "./errors.ts";

const NFTA_CHAIN_TABLE = 1;
const NFTA_CHAIN_NAME = 3;
const NFTA_CHAIN_HOOK = 4;
const NFTA_CHAIN_POLICY = 5;
const NFTA_CHAIN_TYPE = 7;
const NFTA_HOOK_HOOKNUM = 1;
const NFTA_HOOK_PRIORITY = 2;

/** Well-known priorities (nft's names for them). */
export const NF_PRIORITY = {
  mangle: -150,
  dstnat: -100,
  filter: 0,
  srcnat: 100,
} as const;

/** The type of a base chain: what its rules may do. */
export type ChainType = "filter" | "nat" | "route";

/** A chain to create. */
export interface NftChainSpec {
  table: string;
  name: string;
  /** A base chain's hook; absent for a regular chain (reached by jump). */
  hook?: { type: ChainType; hook: HookName; priority: number };
}

/** A chain as the kernel lists it. */
export interface NftChain extends NftChainSpec {
  /** "accept" or "drop" for a base chain. */
  policy?: "accept" | "drop";
}

function checkChain(c: NftChainSpec): void {
  checkNftName(c.table, "chain table");
  checkNftName(c.name, "chain");
  if (c.hook) {
    if (!Object.hasOwn(NF_INET_HOOK, c.hook.hook)) {
      throw new InvalidInputError(`chain ${c.name}: unknown hook "${c.hook.hook}"`);
    }
    if (!["filter", "nat", "route"].includes(c.hook.type)) {
      throw new InvalidInputError(`chain ${c.name}: unknown chain type "${c.hook.type}"`);
    }
    if (!Number.isInteger(c.hook.priority) || Math.abs(c.hook.priority) > 0x7fffffff) {
      throw new InvalidInputError(`chain ${c.name}: priority must be a 32-bit integer`);
    }
  }
}

/** A transaction step that creates a chain (a base chain's policy is accept). */
export function newChainRequest(c: NftChainSpec): BatchRequest {
  checkChain(c);
  const b = nftMessage(NFT_MSG.NEWCHAIN, NLM_F_CREATE)
    .attrString(NFTA_CHAIN_TABLE, c.table)
    .attrString(NFTA_CHAIN_NAME, c.name);
  if (c.hook) {
    const h = b.beginNest(NFTA_CHAIN_HOOK);
    b.attr(NFTA_HOOK_HOOKNUM, be32(NF_INET_HOOK[c.hook.hook]));
    b.attr(NFTA_HOOK_PRIORITY, be32(c.hook.priority));
    b.endNest(h);
    b.attr(NFTA_CHAIN_POLICY, be32(NFT_VERDICT.ACCEPT));
    b.attrString(NFTA_CHAIN_TYPE, c.hook.type);
  }
  return { message: b, subject: `chain ip ${c.table} ${c.name}` };
}

/** Decodes one NFT_MSG_NEWCHAIN message. */
export function parseChain(m: NetlinkMessage): NftChain | undefined {
  const { msg, attrs } = nftAttrs(m);
  if (msg !== NFT_MSG.NEWCHAIN) return undefined;
  const table = attrs.get(NFTA_CHAIN_TABLE);
  const name = attrs.get(NFTA_CHAIN_NAME);
  if (!table || !name) return undefined;
  const out: NftChain = { table: getString(table), name: getString(name) };
  const hook = attrs.get(NFTA_CHAIN_HOOK);
  if (hook) {
    const h = parseAttrs(hook);
    const num = getBe32(h.get(NFTA_HOOK_HOOKNUM)!);
    const hookName = (Object.keys(NF_INET_HOOK) as HookName[]).find((k) => NF_INET_HOOK[k] === num);
    const prio = new DataView(h.get(NFTA_HOOK_PRIORITY)!.slice().buffer).getInt32(0, false);
    const type = attrs.get(NFTA_CHAIN_TYPE);
    out.hook = {
      type: (type ? getString(type) : "filter") as ChainType,
      hook: hookName ?? "prerouting",
      priority: prio,
    };
    const pol = attrs.get(NFTA_CHAIN_POLICY);
    if (pol) out.policy = getBe32(pol) === NFT_VERDICT.ACCEPT ? "accept" : "drop";
  }
  return out;
}

/** The chains of ip-family table `table`. */
export function listChains(s: NetlinkSocket, table: string): NftChain[] {
  const b = nftDumpRequest(NFT_MSG.GETCHAIN).attrString(NFTA_CHAIN_TABLE, table);
  return s.dump(b, (m) => {
    const c = parseChain(m);
    return c && c.table === table ? c : undefined;
  });
}
