/**
 * The repair side of the datapath check: removing an orphan that doctor/datapath.ts found,
 * describing that removal, and keying orphans so `doctor datapath --fix` acts only on what
 * two consecutive looks both found.
 *
 * Only objects of vpcni's exact shape ever reach here (see doctor/datapath.ts), and each is
 * removed by the precise netlink delete for its kind: nothing is matched by pattern at
 * removal time.
 *
 * @module
 */
import { deleteLink, deleteRoute, deleteRule, type NetlinkSocket } from "../netlink/mod.ts";
import { describeRule, type Orphan } from "./datapath.ts";

/** The command-free description of a repair, as `doctor datapath` prints it. */
export function describeFix(o: Orphan): string {
  switch (o.kind) {
    case "rule":
      return `delete ${describeRule(o.rule)}`;
    case "link":
      return `delete host veth ${o.name} (its routes go with it)`;
    case "route":
      return `delete route ${o.route.dst} table main dev #${o.route.dev}`;
    case "table":
      return `flush route table ${o.table} (${o.routes.length} routes)`;
  }
}

/** Removes one orphan through netlink. Objects already gone count as removed. */
export function removeOrphan(s: NetlinkSocket, o: Orphan): void {
  const ignoreGone = (fn: () => void) => {
    try {
      fn();
    } catch (e) {
      if (
        !((e as { errno?: number }).errno === 2 || (e as { errno?: number }).errno === 3 ||
          (e as Error).name === "NotFoundError")
      ) throw e;
    }
  };
  switch (o.kind) {
    case "rule":
      ignoreGone(() => deleteRule(s, { ...o.rule, family: 4 }));
      return;
    case "link":
      ignoreGone(() => deleteLink(s, o.name));
      return;
    case "route":
      ignoreGone(() =>
        deleteRoute(s, { dst: o.route.dst, dev: o.route.dev, table: o.route.table })
      );
      return;
    case "table":
      for (const r of o.routes) {
        ignoreGone(() =>
          deleteRoute(s, {
            dst: r.dst,
            dev: r.dev,
            table: r.table,
            gateway: r.gateway,
            scope: r.scope,
          })
        );
      }
      return;
  }
}

/** A stable key of an orphan, to act only on what two consecutive looks both found. */
export function orphanKey(o: Orphan): string {
  switch (o.kind) {
    case "rule":
      return `rule/${o.rule.priority}/${o.rule.src ?? ""}/${o.rule.dst ?? ""}/${o.rule.table}`;
    case "link":
      return `link/${o.name}`;
    case "route":
      return `route/${o.route.dst}/${o.route.dev}`;
    case "table":
      return `table/${o.table}`;
  }
}
