/**
 * nf_tables through netlink/nft_*.ts against the real kernel, compared with what `nft -j list
 * ruleset` (nftables' own reader) makes of the same ruleset.
 */
import assert from "node:assert/strict";
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
import { listRules, newRuleRequest } from "../../netlink/nft_rule.ts";
import { hostU32, NF_NAT_RANGE_PROTO_RANDOM_FULLY, type NftExpr } from "../../netlink/nft_expr.ts";
import { parseComment, ruleCommentBytes } from "../../netlink/nft_udata.ts";
import { be32 } from "../../netlink/nft_batch.ts";
import { InvalidInputError, NotFoundError } from "../../netlink/errors.ts";
import { requireRoot } from "./fixture.ts";
import { withNetns } from "../helpers/netns.ts";
import { sh } from "../helpers/sh.ts";

const T = "t1";

// deno-lint-ignore no-explicit-any
type NftJson = { nftables: Record<string, any>[] };

async function nftJson(ns: string): Promise<NftJson> {
  return JSON.parse(await sh(["nft", "-j", "list", "ruleset"], { netns: ns }));
}

function objects(j: NftJson, kind: string) {
  return j.nftables.filter((o) => kind in o).map((o) => o[kind]);
}

const SNAT_RULE: NftExpr[] = [
  { type: "payload", base: "network", offset: 16, len: 4, dreg: 1 },
  { type: "lookup", set: "dst", setId: 1, sreg: 1, invert: true },
  { type: "payload", base: "network", offset: 12, len: 4, dreg: 1 },
  { type: "lookup", set: "src", setId: 2, sreg: 1 },
  { type: "counter" },
  { type: "immediate", dreg: 1, data: be32(0x0a07000a) },
  { type: "snat", addrReg: 1, flags: NF_NAT_RANGE_PROTO_RANDOM_FULLY },
];

const MARK_RULE: NftExpr[] = [
  { type: "ct", key: "mark", dreg: 1 },
  { type: "bitwise", sreg: 1, dreg: 1, mask: hostU32(0xff0000), xor: hostU32(0) },
  { type: "cmp", op: "neq", sreg: 1, data: hostU32(0) },
  { type: "metaSet", key: "mark", sreg: 1 },
  { type: "verdict", code: -5 },
];

function build() {
  return [
    newTableRequest(T, ruleCommentBytes("made here")),
    ...newSetRequests({
      table: T,
      name: "dst",
      cidrs: ["10.0.0.0/16", "10.1.0.0/16", "10.0.5.0/24", "192.168.7.7"],
      id: 1,
    }),
    ...newSetRequests({ table: T, name: "src", cidrs: ["255.255.255.0/24"], id: 2 }),
    newChainRequest({
      table: T,
      name: "post",
      hook: { type: "nat", hook: "postrouting", priority: 100 },
    }),
    newChainRequest({
      table: T,
      name: "out",
      hook: { type: "route", hook: "output", priority: -150 },
    }),
    newRuleRequest({ table: T, chain: "post", exprs: SNAT_RULE, comment: "snat it" }),
    newRuleRequest({ table: T, chain: "out", exprs: MARK_RULE, comment: "restore" }),
  ];
}

Deno.test("nf_tables: a table, interval sets, base chains and rules read back alike by us and by nft -j", async () => {
  requireRoot();
  await withNetns(["vnf"], async (ns) => {
    using s = openNftSocket(ns.path);
    commitTransaction(s, build());

    const j = await nftJson(ns.name);
    const [table] = objects(j, "table");
    assert.equal(table.name, T);
    assert.equal(table.family, "ip");
    // nft 1.0.6's JSON leaves a table's comment out; its text shows it.
    assert.match(
      await sh(["nft", "list", "table", "ip", T], { netns: ns.name }),
      /comment "made here"/,
    );
    const chains = Object.fromEntries(objects(j, "chain").map((c) => [c.name, c]));
    assert.deepEqual(
      [chains.post.type, chains.post.hook, chains.post.prio, chains.post.policy],
      ["nat", "postrouting", 100, "accept"],
    );
    assert.deepEqual([chains.out.type, chains.out.hook, chains.out.prio], [
      "route",
      "output",
      -150,
    ]);
    const sets = Object.fromEntries(objects(j, "set").map((x) => [x.name, x]));
    assert.equal(sets.dst.type, "ipv4_addr");
    assert.deepEqual(sets.dst.flags, ["interval"]);
    assert.deepEqual(sets.dst.elem, [
      { prefix: { addr: "10.0.0.0", len: 15 } },
      "192.168.7.7",
    ]);
    assert.deepEqual(sets.src.elem, [{ prefix: { addr: "255.255.255.0", len: 24 } }]);
    const rules = objects(j, "rule");
    const snat = rules.find((r) => r.chain === "post");
    assert.equal(snat.comment, "snat it");
    const snatExpr = snat.expr.find((e: Record<string, unknown>) => "snat" in e).snat;
    assert.equal(snatExpr.addr, "10.7.0.10");
    assert.deepEqual([snatExpr.flags].flat(), ["fully-random"]);
    const text = JSON.stringify(snat.expr);
    assert.match(
      text,
      /"op":"!=","left":\{"payload":\{"protocol":"ip","field":"daddr"\}\},"right":"@dst"/,
    );
    assert.match(
      text,
      /"op":"==","left":\{"payload":\{"protocol":"ip","field":"saddr"\}\},"right":"@src"/,
    );
    const restore = rules.find((r) => r.chain === "out");
    assert.match(JSON.stringify(restore.expr), /"mangle":\{"key":\{"meta":\{"key":"mark"\}\}/);
    assert.match(JSON.stringify(restore.expr), /"return":null/);

    // Our own listing agrees.
    const mine = listTables(s).find((t) => t.name === T)!;
    assert.equal(parseComment(mine.userdata!), "made here");
    assert.deepEqual(listChains(s, T).map((c) => [c.name, c.hook]).sort(), [
      ["out", { type: "route", hook: "output", priority: -150 }],
      ["post", { type: "nat", hook: "postrouting", priority: 100 }],
    ]);
    assert.deepEqual(listSets(s, T).map((x) => x.name).sort(), ["dst", "src"]);
    assert.deepEqual(rangesToCidrText(listSetRanges(s, T, "dst")), [
      "10.0.0.0/15",
      "192.168.7.7/32",
    ]);
    assert.deepEqual(rangesToCidrText(listSetRanges(s, T, "src")), ["255.255.255.0/24"]);
    const listed = listRules(s, T);
    assert.deepEqual(listed.map((r) => [r.chain, r.comment]).sort(), [
      ["out", "restore"],
      ["post", "snat it"],
    ]);
    // The kernel adds NF_NAT_RANGE_MAP_IPS (0x1) to the fully-random flag (0x10) we sent.
    assert.deepEqual(
      listed.find((r) => r.chain === "post")!.exprs.at(-1),
      "nat snat r1 flags 0x11",
    );
  });
});

Deno.test("nf_tables: a transaction is all or nothing, and its error names the failing request", async () => {
  requireRoot();
  await withNetns(["vnf"], async (ns) => {
    using s = openNftSocket(ns.path);
    assert.throws(
      () =>
        commitTransaction(s, [
          newTableRequest(T),
          newChainRequest({
            table: T,
            name: "c",
            hook: { type: "filter", hook: "input", priority: 0 },
          }),
          newRuleRequest({
            table: T,
            chain: "c",
            comment: "needs a set",
            exprs: [
              { type: "payload", base: "network", offset: 12, len: 4, dreg: 1 },
              { type: "lookup", set: "nope", sreg: 1 },
            ],
          }),
        ]),
      (e: Error) => e instanceof NotFoundError && /NFT_MSG_NEWRULE .*needs a set/.test(e.message),
    );
    assert.equal((await sh(["nft", "list", "tables"], { netns: ns.name })).trim(), "");
    // Replacing in one transaction: create (no-op when present), delete, build again.
    commitTransaction(s, build());
    commitTransaction(s, [newTableRequest(T), deleteTableRequest(T), ...build()]);
    const j = await nftJson(ns.name);
    assert.equal(objects(j, "rule").length, 2);
    assert.equal(objects(j, "table").length, 1);
  });
});

Deno.test("nf_tables: bad input is refused before any syscall", () => {
  assert.throws(() => newTableRequest(""), InvalidInputError);
  assert.throws(() => newTableRequest("x".repeat(256)), InvalidInputError);
  assert.throws(
    () => newSetRequests({ table: T, name: "s", cidrs: ["10.0.0.0/33"], id: 1 }),
    /set s: "10\.0\.0\.0\/33" is not an IPv4 address or CIDR/,
  );
  assert.throws(
    () =>
      newRuleRequest({
        table: T,
        chain: "c",
        exprs: [{ type: "payload", base: "network", offset: 12, len: 4, dreg: 9 }],
      }),
    /register must be NFT_REG_1…NFT_REG_4, got 9/,
  );
  assert.throws(
    () => newRuleRequest({ table: T, chain: "c", exprs: [], comment: "c".repeat(128) }),
    InvalidInputError,
  );
  assert.throws(
    () =>
      newChainRequest({
        table: T,
        name: "c",
        hook: { type: "nat", hook: "sideways" as "input", priority: 0 },
      }),
    /unknown hook "sideways"/,
  );
});

Deno.test("nf_tables: CIDR blocks merge into disjoint ranges and split back into the fewest blocks", () => {
  assert.deepEqual(rangesToCidrText(cidrsToRanges(["10.0.0.0/24", "10.0.1.0/24"])), [
    "10.0.0.0/23",
  ]);
  assert.deepEqual(rangesToCidrText(cidrsToRanges(["10.0.0.7/24", "10.0.0.9"])), ["10.0.0.0/24"]);
  assert.deepEqual(rangesToCidrText(cidrsToRanges(["10.0.1.0/24", "10.0.2.0/24"])), [
    "10.0.1.0/24",
    "10.0.2.0/24",
  ]);
  assert.deepEqual(rangesToCidrText(cidrsToRanges(["0.0.0.0/0"])), ["0.0.0.0/0"]);
  assert.deepEqual(rangesToCidrText(cidrsToRanges([])), []);
});
