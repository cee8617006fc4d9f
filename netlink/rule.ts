/**
 * Policy routing rules: add, delete, list — with priority, from/to, iif/oif, fwmark/mask and
 * table.
 *
 * @module
 */

import {
  getString,
  getU32,
  MessageBuilder,
  type NetlinkMessage,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_EXCL,
  parseAttrs,
  RTM,
} from "./codec.ts";
import { InvalidInputError } from "./errors.ts";
import { afOf, type Family, familyOfAf, formatIp, parseCidr } from "./ip.ts";
import { checkFamily } from "./scope.ts";
import type { NetlinkSocket } from "./socket.ts";
import { checkIfName, checkU32 } from "./validate.ts";

/** A policy routing rule. */
export interface Rule {
  /** Priority (lower is looked at first). */
  priority: number;
  /** 4 or 6. */
  family: Family;
  /** Source CIDR ("from"). */
  src?: string;
  /** Destination CIDR ("to"). */
  dst?: string;
  /** Input interface name. */
  iif?: string;
  /** Output interface name. */
  oif?: string;
  /** Firewall mark. */
  fwmark?: number;
  /** Mask for `fwmark`. */
  fwmask?: number;
  /** Table to look up. */
  table: number;
  /** "not": the selector is inverted. */
  invert?: boolean;
}

/** A rule to add or delete. */
export type RuleSpec = Partial<Rule> & { priority: number; table: number };

const FRA_DST = 1;
const FRA_SRC = 2;
const FRA_IIFNAME = 3;
const FRA_PRIORITY = 6;
const FRA_FWMARK = 10;
const FRA_TABLE = 15;
const FRA_FWMASK = 16;
const FRA_OIFNAME = 17;
const FR_ACT_TO_TBL = 1;
const FIB_RULE_INVERT = 2;
const FIB_RULE_HDR_LEN = 12;

function describe(r: RuleSpec): string {
  const parts = [`priority ${r.priority}`];
  if (r.invert) parts.push("not");
  if (r.src) parts.push(`from ${r.src}`);
  if (r.dst) parts.push(`to ${r.dst}`);
  if (r.iif) parts.push(`iif ${r.iif}`);
  if (r.oif) parts.push(`oif ${r.oif}`);
  if (r.fwmark !== undefined) parts.push(`fwmark ${r.fwmark}`);
  parts.push(`lookup ${r.table}`);
  return parts.join(" ");
}

function ruleRequest(type: number, flags: number, r: RuleSpec): MessageBuilder {
  if (r === null || typeof r !== "object") throw new InvalidInputError("rule spec is required");
  const priority = checkU32(r.priority, "rule priority");
  const table = checkU32(r.table, "rule table");
  const src = r.src !== undefined ? parseCidr(r.src, true, "rule from") : undefined;
  const dst = r.dst !== undefined ? parseCidr(r.dst, true, "rule to") : undefined;
  const family: Family = r.family !== undefined
    ? checkFamily(r.family)
    : src?.family ?? dst?.family ?? 4;
  for (const [what, c, text] of [["from", src, r.src], ["to", dst, r.dst]] as const) {
    if (c && c.family !== family) {
      throw new InvalidInputError(
        `wrong address family: rule ${what} ${text} is IPv${c.family} but the rule is IPv${family}`,
      );
    }
  }
  if (r.iif !== undefined) checkIfName(r.iif, "rule iif");
  if (r.oif !== undefined) checkIfName(r.oif, "rule oif");
  const fwmark = r.fwmark !== undefined ? checkU32(r.fwmark, "rule fwmark") : undefined;
  const fwmask = r.fwmask !== undefined ? checkU32(r.fwmask, "rule fwmask") : undefined;

  const b = new MessageBuilder(type, flags)
    .u8(afOf(family)).u8(dst?.prefixLen ?? 0).u8(src?.prefixLen ?? 0).u8(0)
    .u8(table < 256 ? table : 0).u8(0).u8(0).u8(type === RTM.NEWRULE ? FR_ACT_TO_TBL : 0)
    .u32(r.invert ? FIB_RULE_INVERT : 0);
  b.attrU32(FRA_PRIORITY, priority).attrU32(FRA_TABLE, table);
  if (src && src.prefixLen > 0) b.attr(FRA_SRC, src.bytes);
  if (dst && dst.prefixLen > 0) b.attr(FRA_DST, dst.bytes);
  if (r.iif !== undefined) b.attrString(FRA_IIFNAME, r.iif);
  if (r.oif !== undefined) b.attrString(FRA_OIFNAME, r.oif);
  if (fwmark !== undefined) b.attrU32(FRA_FWMARK, fwmark);
  if (fwmask !== undefined) b.attrU32(FRA_FWMASK, fwmask);
  return b;
}

/** Adds a rule; ExistsError when an identical rule is there. */
export function addRule(s: NetlinkSocket, r: RuleSpec): void {
  const b = ruleRequest(RTM.NEWRULE, NLM_F_CREATE | NLM_F_EXCL, r);
  s.request(b, describe(r));
}

/** Deletes the rule matching the given fields; NotFoundError when none matches. */
export function deleteRule(s: NetlinkSocket, r: RuleSpec): void {
  const b = ruleRequest(RTM.DELRULE, 0, r);
  s.request(b, describe(r));
}

/** Decodes one RTM_NEWRULE message. */
export function parseRule(msg: NetlinkMessage): Rule | undefined {
  const d = msg.data;
  const family = familyOfAf(d[0]);
  if (family === undefined) return undefined;
  const view = new DataView(d.buffer, d.byteOffset, d.byteLength);
  const a = parseAttrs(d, FIB_RULE_HDR_LEN);
  const rule: Rule = {
    priority: a.has(FRA_PRIORITY) ? getU32(a.get(FRA_PRIORITY)!) : 0,
    family,
    table: a.has(FRA_TABLE) ? getU32(a.get(FRA_TABLE)!) : d[4],
  };
  if (a.has(FRA_SRC)) rule.src = `${formatIp(a.get(FRA_SRC)!)}/${d[2]}`;
  if (a.has(FRA_DST)) rule.dst = `${formatIp(a.get(FRA_DST)!)}/${d[1]}`;
  if (a.has(FRA_IIFNAME)) rule.iif = getString(a.get(FRA_IIFNAME)!);
  if (a.has(FRA_OIFNAME)) rule.oif = getString(a.get(FRA_OIFNAME)!);
  if (a.has(FRA_FWMARK)) rule.fwmark = getU32(a.get(FRA_FWMARK)!);
  if (a.has(FRA_FWMASK)) rule.fwmask = getU32(a.get(FRA_FWMASK)!);
  if (view.getUint32(8, true) & FIB_RULE_INVERT) rule.invert = true;
  return rule;
}

/** Rules in the socket's netns (both families unless `family` is given). */
export function listRules(s: NetlinkSocket, family?: Family): Rule[] {
  const af = family !== undefined ? afOf(checkFamily(family)) : 0;
  const b = new MessageBuilder(RTM.GETRULE, NLM_F_DUMP)
    .u8(af).u8(0).u8(0).u8(0).u8(0).u8(0).u8(0).u8(0).u32(0);
  return s.dump(b, (m) => {
    if (m.type !== RTM.NEWRULE) return undefined;
    const r = parseRule(m);
    if (!r || (family !== undefined && r.family !== family)) return undefined;
    return r;
  });
}
