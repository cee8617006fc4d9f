/**
 * Reads vpcni's egress ruleset from the kernel, compares it with the plan, and makes it so:
 * the nftables part is replaced in one atomic transaction (create the table, delete it with
 * everything in it, build it again), so packets never see half a ruleset; the policy rules
 * are added and deleted one by one. Nothing outside table `ip vpcni` and vpcni's mark rules
 * is ever read for a change or touched.
 *
 * @module
 */
import { commitTransaction, openNftSocket } from "../../netlink/nft_batch.ts";
import { deleteTableRequest, listTables, newTableRequest } from "../../netlink/nft_table.ts";
import { listChains, newChainRequest } from "../../netlink/nft_chain.ts";
import {
  cidrsToRanges,
  listSetRanges,
  listSets,
  newSetRequests,
  rangesToCidrText,
} from "../../netlink/nft_set.ts";
import { listRules as listNftRules, newRuleRequest } from "../../netlink/nft_rule.ts";
import { parseComment, ruleCommentBytes } from "../../netlink/nft_udata.ts";
import type { BatchRequest, NetlinkSocket } from "../../netlink/socket.ts";
import { NetlinkSocket as RouteSocket } from "../../netlink/socket.ts";
import { addRule, deleteRule, listRules, type Rule } from "../../netlink/rule.ts";
import { isExists, isNotFound } from "../../netlink/errors.ts";
import {
  EGRESS_RULE_PRIORITY,
  EGRESS_TABLE,
  EGRESS_TABLE_COMMENT,
  type EgressIpRule,
  type EgressPlan,
  MARK_MASK,
} from "./plan.ts";

/** What the kernel holds of vpcni's egress ruleset. */
export interface EgressKernelState {
  /** Table `ip vpcni` exists. */
  table: boolean;
  /** It carries vpcni's comment (a table of that name without it is not ours). */
  ours: boolean;
  chains: { name: string; hook?: string }[];
  sets: Map<string, string[]>;
  /** Rule comments per chain, in order. */
  rules: Map<string, string[]>;
  /** Policy rules at vpcni's priority with vpcni's mark mask. */
  ipRules: Rule[];
}

/** Differences between the plan and the kernel, one readable line each. */
export interface EgressDiff {
  missing: string[];
  stray: string[];
}

function hookText(h: { type: string; hook: string; priority: number } | undefined) {
  return h ? `${h.type} hook ${h.hook} priority ${h.priority}` : undefined;
}

function ipRuleText(r: { fwmark?: number; fwmask?: number; table: number }): string {
  return `rule ${EGRESS_RULE_PRIORITY} fwmark 0x${(r.fwmark ?? 0).toString(16)}/0x${
    (r.fwmask ?? 0).toString(16)
  } lookup ${r.table === 254 ? "main" : r.table}`;
}

/** Reads the egress ruleset through the given sockets (nfnetlink, rtnetlink). */
export function readEgress(nft: NetlinkSocket, rt: NetlinkSocket): EgressKernelState {
  const t = listTables(nft).find((x) => x.name === EGRESS_TABLE);
  const ipRules = listRules(rt, 4).filter((r) =>
    r.priority === EGRESS_RULE_PRIORITY && r.fwmask === MARK_MASK
  );
  const state: EgressKernelState = {
    table: !!t,
    ours: !!t?.userdata && parseComment(t.userdata) === EGRESS_TABLE_COMMENT,
    chains: [],
    sets: new Map(),
    rules: new Map(),
    ipRules,
  };
  if (!t) return state;
  state.chains = listChains(nft, EGRESS_TABLE).map((c) => ({
    name: c.name,
    hook: hookText(c.hook),
  }));
  for (const s of listSets(nft, EGRESS_TABLE)) {
    state.sets.set(s.name, rangesToCidrText(listSetRanges(nft, EGRESS_TABLE, s.name)));
  }
  for (const r of listNftRules(nft, EGRESS_TABLE)) {
    const list = state.rules.get(r.chain) ?? [];
    list.push(r.comment ?? `(rule ${r.handle} without a comment)`);
    state.rules.set(r.chain, list);
  }
  return state;
}

/** Compares the plan with what the kernel holds. */
export function diffEgress(plan: EgressPlan, k: EgressKernelState): EgressDiff {
  const missing: string[] = [];
  const stray: string[] = [];
  const want = plan.chains.length > 0;
  if (want && !k.table) missing.push(`table ip ${EGRESS_TABLE}`);
  if (!want && k.table && k.ours) stray.push(`table ip ${EGRESS_TABLE}`);
  if (want && k.table) {
    for (const c of plan.chains) {
      const have = k.chains.find((x) => x.name === c.name);
      if (!have) missing.push(`chain ${c.name}`);
      else if (have.hook !== hookText(c.hook)) {
        stray.push(`chain ${c.name} (${have.hook}, wanted ${hookText(c.hook)})`);
      }
    }
    for (const c of k.chains) {
      if (!plan.chains.some((x) => x.name === c.name)) stray.push(`chain ${c.name}`);
    }
    for (const s of plan.sets) {
      const have = k.sets.get(s.name);
      const wantText = rangesToCidrText(cidrsToRanges(s.cidrs));
      if (!have) missing.push(`set ${s.name}`);
      else if (have.join(",") !== wantText.join(",")) {
        missing.push(`set ${s.name} = {${wantText.join(", ")}} (holds {${have.join(", ")}})`);
      }
    }
    for (const name of k.sets.keys()) {
      if (!plan.sets.some((s) => s.name === name)) stray.push(`set ${name}`);
    }
    const chains = new Set([...plan.chains.map((c) => c.name), ...k.rules.keys()]);
    for (const chain of chains) {
      const wantRules = plan.rules.filter((r) => r.chain === chain).map((r) => r.comment!);
      const have = k.rules.get(chain) ?? [];
      for (const c of wantRules) if (!have.includes(c)) missing.push(`rule in ${chain}: ${c}`);
      for (const c of have) if (!wantRules.includes(c)) stray.push(`rule in ${chain}: ${c}`);
      const common = have.filter((c) => wantRules.includes(c));
      if (common.join("\n") !== wantRules.filter((c) => have.includes(c)).join("\n")) {
        stray.push(`rules of chain ${chain} out of order`);
      }
    }
  }
  const key = (r: { fwmark?: number; table: number }) => `${r.fwmark}/${r.table}`;
  const haveRules = new Set(k.ipRules.map(key));
  const wantRules = new Set(plan.ipRules.map(key));
  for (const r of plan.ipRules) if (!haveRules.has(key(r))) missing.push(ipRuleText(r));
  for (const r of k.ipRules) if (!wantRules.has(key(r))) stray.push(ipRuleText(r));
  return { missing, stray };
}

/** The transaction that replaces (or creates) table `ip vpcni` with the plan's contents. */
export function replaceTableRequests(plan: EgressPlan): BatchRequest[] {
  const comment = ruleCommentBytes(EGRESS_TABLE_COMMENT);
  return [
    newTableRequest(EGRESS_TABLE, comment),
    deleteTableRequest(EGRESS_TABLE),
    newTableRequest(EGRESS_TABLE, comment),
    ...plan.sets.flatMap(newSetRequests),
    ...plan.chains.map(newChainRequest),
    ...plan.rules.map(newRuleRequest),
  ];
}

/** What an apply did. */
export interface EgressApplyResult {
  /** The differences found before acting (empty: nothing was done). */
  diff: EgressDiff;
  /** The nftables table was replaced, created or removed. */
  tableChanged: boolean;
}

/**
 * Makes the kernel match the plan (in the netns at `netnsPath`, or here). A table named
 * `ip vpcni` that vpcni did not make is refused, not replaced.
 */
export function applyEgress(plan: EgressPlan, netnsPath?: string): EgressApplyResult {
  using nft = openNftSocket(netnsPath);
  using rt = netnsPath ? RouteSocket.openIn(netnsPath) : RouteSocket.open();
  const k = readEgress(nft, rt);
  const diff = diffEgress(plan, k);
  const nftDiffers = [...diff.missing, ...diff.stray].some((l) => !l.startsWith("rule 1500 "));
  let tableChanged = false;
  if (nftDiffers) {
    if (k.table && !k.ours) {
      throw new Error(
        `a table ip ${EGRESS_TABLE} exists that vpcni did not make (no "${EGRESS_TABLE_COMMENT}" ` +
          `comment): rename or delete it, vpcni will not touch it`,
      );
    }
    if (plan.chains.length > 0) commitTransaction(nft, replaceTableRequests(plan));
    else commitTransaction(nft, [deleteTableRequest(EGRESS_TABLE)]);
    tableChanged = true;
  }
  applyIpRules(rt, plan.ipRules, k.ipRules);
  return { diff, tableChanged };
}

function applyIpRules(rt: NetlinkSocket, want: EgressIpRule[], have: Rule[]): void {
  const key = (r: { fwmark?: number; table: number }) => `${r.fwmark}/${r.table}`;
  const wanted = new Set(want.map(key));
  for (const r of have) {
    if (wanted.has(key(r))) continue;
    try {
      deleteRule(rt, { ...r, family: 4 });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }
  const present = new Set(have.map(key));
  for (const r of want) {
    if (present.has(key(r))) continue;
    try {
      addRule(rt, { family: 4, ...r });
    } catch (e) {
      if (!isExists(e)) throw e;
    }
  }
}

/** Removes vpcni's egress ruleset (its table, if ours, and its mark rules). */
export function removeEgress(netnsPath?: string): EgressApplyResult {
  return applyEgress({ sets: [], chains: [], rules: [], ipRules: [] }, netnsPath);
}
