import assert from "node:assert/strict";
import {
  addRule,
  deleteRule,
  ExistsError,
  InvalidInputError,
  listRules,
  NotFoundError,
  type Rule,
  type RuleSpec,
} from "../../netlink/mod.ts";
import { type NetnsWithSocket, withSockets } from "./fixture.ts";
import { ipJson } from "../helpers/sh.ts";

interface IpRule {
  priority: number;
  not?: null;
  src?: string;
  srclen?: number;
  dst?: string;
  dstlen?: number;
  iif?: string;
  oif?: string;
  fwmark?: string;
  fwmask?: string;
  table: string;
}

const TABLE_NAMES: Record<string, number> = { local: 255, main: 254, default: 253 };

function ipView(j: IpRule, family: 4 | 6): Rule {
  const host = family === 4 ? 32 : 128;
  const r: Rule = { priority: j.priority, family, table: TABLE_NAMES[j.table] ?? Number(j.table) };
  if (j.src !== undefined && j.src !== "all") r.src = `${j.src}/${j.srclen ?? host}`;
  if (j.dst !== undefined && j.dst !== "all") r.dst = `${j.dst}/${j.dstlen ?? host}`;
  if (j.iif !== undefined) r.iif = j.iif;
  if (j.oif !== undefined) r.oif = j.oif;
  if (j.fwmark !== undefined) {
    r.fwmark = Number(j.fwmark);
    r.fwmask = j.fwmask !== undefined ? Number(j.fwmask) : 0xffffffff; // ip omits a full mask
  }
  if ("not" in j) r.invert = true;
  return r;
}

async function assertSameAsIp(ns: NetnsWithSocket) {
  for (const family of [4, 6] as const) {
    const theirs = (await ipJson<IpRule[]>([`-${family}`, "rule", "show"], ns.name))
      .map((j) => ipView(j, family));
    assert.deepEqual(listRules(ns.sock, family), theirs, `IPv${family} rules`);
  }
}

const RULES: RuleSpec[] = [
  { priority: 100, dst: "10.0.0.5/32", table: 254 },
  { priority: 200, src: "10.0.0.5/32", table: 100 },
  { priority: 300, iif: "vnlin0", table: 101 },
  { priority: 400, oif: "vnlout0", fwmark: 0x10, fwmask: 0xff, table: 102 },
  { priority: 500, src: "10.1.0.0/16", invert: true, table: 103 },
  { priority: 600, src: "fd00::/64", dst: "fd00:1::/64", table: 104 },
  { priority: 700, src: "10.0.0.6/32", table: 70000 },
  { priority: 4294967295, fwmark: 7, table: 105 },
];

Deno.test("addRule/listRules: priority, from/to, iif/oif, fwmark/mask, not, table match ip -j rule", async () => {
  await withSockets(1, async (ns) => {
    for (const r of RULES) addRule(ns.sock, r);
    const v4 = listRules(ns.sock, 4);
    const byPrio = (p: number) => v4.find((r) => r.priority === p);
    assert.deepEqual(byPrio(200), { priority: 200, family: 4, src: "10.0.0.5/32", table: 100 });
    assert.deepEqual(byPrio(400), {
      priority: 400,
      family: 4,
      oif: "vnlout0",
      fwmark: 0x10,
      fwmask: 0xff,
      table: 102,
    });
    assert.equal(byPrio(500)?.invert, true);
    assert.equal(byPrio(700)?.table, 70000);
    assert.equal(byPrio(4294967295)?.table, 105);
    assert.deepEqual(listRules(ns.sock, 6).find((r) => r.priority === 600), {
      priority: 600,
      family: 6,
      src: "fd00::/64",
      dst: "fd00:1::/64",
      table: 104,
    });
    assert.equal(listRules(ns.sock).length, v4.length + listRules(ns.sock, 6).length);
    await assertSameAsIp(ns);
  });
});

Deno.test("deleteRule removes the matching rule; duplicates and missing rules are typed", async () => {
  await withSockets(1, async (ns) => {
    const before = listRules(ns.sock);
    for (const r of RULES) addRule(ns.sock, r);
    assert.throws(
      () => addRule(ns.sock, RULES[1]),
      (e: unknown) =>
        e instanceof ExistsError &&
        e.message.startsWith("RTM_NEWRULE priority 200 from 10.0.0.5/32 lookup 100: File exists"),
    );
    for (const r of RULES) deleteRule(ns.sock, r);
    assert.deepEqual(listRules(ns.sock), before);
    await assertSameAsIp(ns);
    assert.throws(() => deleteRule(ns.sock, RULES[0]), NotFoundError);
    assert.throws(
      () => addRule(ns.sock, { priority: 10, src: "10.0.0.0/8", dst: "fd00::/8", table: 1 }),
      (e: unknown) => e instanceof InvalidInputError && /wrong address family/.test(e.message),
    );
  });
});
