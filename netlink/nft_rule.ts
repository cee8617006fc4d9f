/**
 * nf_tables rules: a chain's list of expressions, with a comment kept in the rule's user data
 * (the same TLV nft uses, so `nft list ruleset` shows it), and their listing.
 *
 * @module
 */
import { NLM_F_APPEND_RULE, ruleCommentBytes } from "./nft_udata.ts";
import { getString, type NetlinkMessage, NLM_F_CREATE } from "./codec.ts";
import type { BatchRequest, NetlinkSocket } from "./socket.ts";
import { getBe64, NFT_MSG, nftAttrs, nftDumpRequest, nftMessage } from "./nft_batch.ts";
import { checkNftName } from "./nft_table.ts";
import { describeExpressions, encodeExpressions, type NftExpr } from "./nft_expr.ts";
import { parseComment } from "./nft_udata.ts";

const NFTA_RULE_TABLE = 1;
const NFTA_RULE_CHAIN = 2;
const NFTA_RULE_HANDLE = 3;
const NFTA_RULE_EXPRESSIONS = 4;
const NFTA_RULE_USERDATA = 7;

/** A rule to append to a chain. */
export interface NftRuleSpec {
  table: string;
  chain: string;
  exprs: NftExpr[];
  /** Shown by `nft list` as the rule's comment (at most 127 bytes). */
  comment?: string;
}

/** A rule as the kernel lists it. */
export interface NftRule {
  table: string;
  chain: string;
  handle: bigint;
  comment?: string;
  /** One short text per expression (see describeExpressions). */
  exprs: string[];
}

/** A transaction step that appends a rule to its chain. */
export function newRuleRequest(r: NftRuleSpec): BatchRequest {
  checkNftName(r.table, "rule table");
  checkNftName(r.chain, "rule chain");
  const b = nftMessage(NFT_MSG.NEWRULE, NLM_F_CREATE | NLM_F_APPEND_RULE)
    .attrString(NFTA_RULE_TABLE, r.table)
    .attrString(NFTA_RULE_CHAIN, r.chain);
  encodeExpressions(b, NFTA_RULE_EXPRESSIONS, r.exprs);
  if (r.comment !== undefined) b.attr(NFTA_RULE_USERDATA, ruleCommentBytes(r.comment));
  return {
    message: b,
    subject: `rule in chain ip ${r.table} ${r.chain}${r.comment ? ` (${r.comment})` : ""}`,
  };
}

/** Decodes one NFT_MSG_NEWRULE message. */
export function parseRule(m: NetlinkMessage): NftRule | undefined {
  const { msg, attrs } = nftAttrs(m);
  if (msg !== NFT_MSG.NEWRULE) return undefined;
  const table = attrs.get(NFTA_RULE_TABLE);
  const chain = attrs.get(NFTA_RULE_CHAIN);
  const handle = attrs.get(NFTA_RULE_HANDLE);
  if (!table || !chain || !handle) return undefined;
  const ud = attrs.get(NFTA_RULE_USERDATA);
  const ex = attrs.get(NFTA_RULE_EXPRESSIONS);
  return {
    table: getString(table),
    chain: getString(chain),
    handle: getBe64(handle),
    comment: ud ? parseComment(ud) : undefined,
    exprs: ex ? describeExpressions(ex) : [],
  };
}

/** The rules of ip-family table `table`, chain by chain in their order. */
export function listRules(s: NetlinkSocket, table: string): NftRule[] {
  const b = nftDumpRequest(NFT_MSG.GETRULE).attrString(NFTA_RULE_TABLE, table);
  return s.dump(b, (m) => {
    const r = parseRule(m);
    return r && r.table === table ? r : undefined;
  });
}
