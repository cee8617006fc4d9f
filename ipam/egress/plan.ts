/**
 * What the node's egress ruleset should be, computed from the configuration and the node's
 * facts (pure: nothing here touches the kernel). vpcni owns one nftables table, `ip vpcni`:
 *
 * - set `vpc`: the VPC's CIDR blocks (all of them), never SNATed;
 * - per SNATing pool P: set `src-P` (the pool's subnets) and set `skip-P` (its
 *   `snatExcludeCidrs`);
 * - chain `prerouting` (filter) and chain `output` (route: a changed mark re-routes locally
 *   sent packets, ipvlan-l3s pods' included), both at {@linkcode MARK_PRIORITY}, after DNAT: a
 *   connection's mark is restored to the packet; a new connection entering through ENI d is
 *   marked d; a new connection of a SNATing pod to outside the VPC is marked 0 (the primary
 *   ENI). Only the bits of {@linkcode MARK_MASK} are set, so kube-proxy's marks survive;
 * - chain `postrouting` (nat, srcnat priority): a SNATing pod's packets to outside the VPC and
 *   outside its exclusions leave with the node's address (ports fully random unless turned off).
 *
 * Policy rules at priority {@linkcode EGRESS_RULE_PRIORITY} send marked packets to the marked
 * ENI's route table (the primary ENI's is main).
 *
 * @module
 */
import { be32 } from "../../netlink/nft_batch.ts";
import {
  CT_STATE,
  hostU32,
  NF_NAT_RANGE_PROTO_RANDOM_FULLY,
  NFT_REG_1,
  type NftExpr,
} from "../../netlink/nft_expr.ts";
import type { NftChainSpec } from "../../netlink/nft_chain.ts";
import type { NftRuleSpec } from "../../netlink/nft_rule.ts";
import type { NftSetSpec } from "../../netlink/nft_set.ts";
import { parseIpv4 } from "../../base/ipv4.ts";

/** The nftables table vpcni owns (family ip). Nothing else of the ruleset is touched. */
export const EGRESS_TABLE = "vpcni";
/** The comment on vpcni's table: how doctor tells ours from a table someone else named so. */
export const EGRESS_TABLE_COMMENT = "vpcni egress: SNAT and connection marks (do not edit)";
/**
 * Priority of the mark rules: after `to <pod> lookup main` (1000), so traffic to a pod is
 * never diverted, and before `from <pod> lookup T(E)` (2000), which they override.
 */
export const EGRESS_RULE_PRIORITY = 1500;
/** The bits of the packet and connection mark vpcni uses (kube-proxy uses 0x4000, 0x8000). */
export const MARK_MASK = 0x00ff0000;
/**
 * Priority of the mark chains: just after dstnat (-100), so a Service's DNAT has happened and
 * the endpoint (a pod in the VPC), not the ClusterIP, decides whether a packet leaves the VPC.
 */
export const MARK_PRIORITY = -90;
/** The main route table. */
export const RT_TABLE_MAIN = 254;

/** The mark of "leaves through the ENI at device index d" (d = 0: the primary ENI). */
export function eniMark(deviceIndex: number): number {
  return ((deviceIndex + 1) << 16) & MARK_MASK;
}

/** One pool's egress settings and the source blocks its pods' addresses come from. */
export interface PoolEgress {
  name: string;
  snat: "node" | "none";
  excludeCidrs: string[];
  randomFully: boolean;
  /** The pool's subnets' CIDR blocks. */
  sourceCidrs: string[];
}

/** An ENI attached to the node, as the connection marks need it. */
export interface EgressEni {
  deviceIndex: number;
  /** The ENI's link index in the node's netns (undefined: not found, not marked). */
  ifindex?: number;
  /** Route table of its traffic: main for the primary ENI, routeTableBase + d otherwise. */
  table: number;
}

/** The node's facts the ruleset depends on. */
export interface EgressFacts {
  /** The primary ENI's primary address: what SNATed packets leave with. */
  nodeIp: string;
  /** Every CIDR block of the VPC (IMDS vpc-ipv4-cidr-blocks). */
  vpcCidrs: string[];
  enis: EgressEni[];
  pools: PoolEgress[];
}

/** A policy rule vpcni keeps for egress. */
export interface EgressIpRule {
  priority: number;
  fwmark: number;
  fwmask: number;
  table: number;
}

/** The desired ruleset; empty (no sets, chains, rules) when no pool SNATs. */
export interface EgressPlan {
  sets: NftSetSpec[];
  chains: NftChainSpec[];
  rules: NftRuleSpec[];
  ipRules: EgressIpRule[];
}

const R = NFT_REG_1;
const SADDR: NftExpr = { type: "payload", base: "network", offset: 12, len: 4, dreg: R };
const DADDR: NftExpr = { type: "payload", base: "network", offset: 16, len: 4, dreg: R };
const CT_NEW: NftExpr[] = [
  { type: "ct", key: "state", dreg: R },
  { type: "bitwise", sreg: R, dreg: R, mask: hostU32(CT_STATE.new), xor: hostU32(0) },
  { type: "cmp", op: "neq", sreg: R, data: hostU32(0) },
];

function addr(ip: string): Uint8Array {
  const n = parseIpv4(ip);
  if (n === undefined) throw new Error(`not an IPv4 address: ${ip}`);
  return be32(n);
}

/** `<key> mark set <key> mark & ~MARK_MASK | mark`: vpcni's bits only, others kept. */
function setBits(key: "ct" | "meta", mark: number): NftExpr[] {
  return [
    key === "ct" ? { type: "ct", key: "mark", dreg: R } : { type: "meta", key: "mark", dreg: R },
    { type: "bitwise", sreg: R, dreg: R, mask: hostU32(~MARK_MASK), xor: hostU32(mark) },
    key === "ct"
      ? { type: "ctSet", key: "mark", sreg: R }
      : { type: "metaSet", key: "mark", sreg: R },
  ];
}

function setMark(mark: number): NftExpr[] {
  return [...setBits("ct", mark), ...setBits("meta", mark)];
}

/** `ct mark & MARK_MASK == mark`: the connection carries vpcni's mark `mark`. */
function ctMarkIs(mark: number): NftExpr[] {
  return [
    { type: "ct", key: "mark", dreg: R },
    { type: "bitwise", sreg: R, dreg: R, mask: hostU32(MARK_MASK), xor: hostU32(0) },
    { type: "cmp", op: "eq", sreg: R, data: hostU32(mark) },
  ];
}

/** FNV-1a of the rule's encoding: part of its comment, so a changed rule is a different one. */
function fingerprint(exprs: NftExpr[]): string {
  const text = JSON.stringify(
    exprs,
    (_k, v) => v instanceof Uint8Array ? [...v].join(".") : v,
  );
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, "0");
}

function rule(chain: string, what: string, exprs: NftExpr[]): NftRuleSpec {
  return { table: EGRESS_TABLE, chain, exprs, comment: `${what} #${fingerprint(exprs)}` };
}

/** The pool's "pod to outside the VPC and its exclusions" match. */
function egressMatch(p: PoolEgress, nodeIp: string, setIds: Map<string, number>): NftExpr[] {
  return [
    SADDR,
    { type: "lookup", set: `src-${p.name}`, setId: setIds.get(`src-${p.name}`), sreg: R },
    { type: "cmp", op: "neq", sreg: R, data: addr(nodeIp) },
    DADDR,
    { type: "lookup", set: "vpc", setId: setIds.get("vpc"), sreg: R, invert: true },
    {
      type: "lookup",
      set: `skip-${p.name}`,
      setId: setIds.get(`skip-${p.name}`),
      sreg: R,
      invert: true,
    },
  ];
}

/** The desired ruleset for `facts`. */
export function planEgress(facts: EgressFacts): EgressPlan {
  const snatPools = facts.pools.filter((p) => p.snat === "node");
  if (snatPools.length === 0) return { sets: [], chains: [], rules: [], ipRules: [] };
  const sets: NftSetSpec[] = [{ table: EGRESS_TABLE, name: "vpc", cidrs: facts.vpcCidrs, id: 1 }];
  for (const p of snatPools) {
    sets.push({ table: EGRESS_TABLE, name: `src-${p.name}`, cidrs: p.sourceCidrs, id: 0 });
    sets.push({ table: EGRESS_TABLE, name: `skip-${p.name}`, cidrs: p.excludeCidrs, id: 0 });
  }
  sets.forEach((s, i) => s.id = i + 1);
  const setIds = new Map(sets.map((s) => [s.name, s.id]));
  const chains: NftChainSpec[] = [
    {
      table: EGRESS_TABLE,
      name: "prerouting",
      hook: { type: "filter", hook: "prerouting", priority: MARK_PRIORITY },
    },
    {
      table: EGRESS_TABLE,
      name: "output",
      hook: { type: "route", hook: "output", priority: MARK_PRIORITY },
    },
    {
      table: EGRESS_TABLE,
      name: "postrouting",
      hook: { type: "nat", hook: "postrouting", priority: 100 },
    },
  ];
  const marked = [
    ...new Set([
      0,
      ...facts.enis.filter((e) => e.ifindex !== undefined)
        .map((e) => e.deviceIndex),
    ]),
  ].sort((a, b) => a - b);
  const rules: NftRuleSpec[] = [];
  for (const chain of ["prerouting", "output"]) {
    for (const d of marked) {
      rules.push(rule(chain, `connection of ENI #${d}: mark the packet`, [
        ...ctMarkIs(eniMark(d)),
        ...setBits("meta", eniMark(d)),
        { type: "verdict", code: -5 },
      ]));
    }
    if (chain === "prerouting") {
      for (const e of [...facts.enis].sort((a, b) => a.deviceIndex - b.deviceIndex)) {
        if (e.ifindex === undefined) continue;
        rules.push(rule(chain, `entered through ENI #${e.deviceIndex}`, [
          { type: "meta", key: "iif", dreg: R },
          { type: "cmp", op: "eq", sreg: R, data: hostU32(e.ifindex) },
          ...CT_NEW,
          ...setMark(eniMark(e.deviceIndex)),
          { type: "verdict", code: -5 },
        ]));
      }
    }
    for (const p of snatPools) {
      rules.push(rule(chain, `pool ${p.name}: out via the primary ENI`, [
        ...CT_NEW,
        ...egressMatch(p, facts.nodeIp, setIds),
        ...setMark(eniMark(0)),
      ]));
    }
  }
  for (const p of snatPools) {
    rules.push(rule("postrouting", `pool ${p.name}: SNAT to ${facts.nodeIp}`, [
      ...egressMatch(p, facts.nodeIp, setIds),
      { type: "counter" },
      { type: "immediate", dreg: R, data: addr(facts.nodeIp) },
      { type: "snat", addrReg: R, flags: p.randomFully ? NF_NAT_RANGE_PROTO_RANDOM_FULLY : 0 },
    ]));
  }
  const tables = new Map<number, number>([[0, RT_TABLE_MAIN]]);
  for (const e of facts.enis) if (e.ifindex !== undefined) tables.set(e.deviceIndex, e.table);
  const ipRules = [...tables].sort((a, b) => a[0] - b[0]).map(([d, table]) => ({
    priority: EGRESS_RULE_PRIORITY,
    fwmark: eniMark(d),
    fwmask: MARK_MASK,
    table,
  }));
  return { sets, chains, rules, ipRules };
}
