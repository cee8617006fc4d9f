/**
 * CHECK: compares what a {@linkcode Plan} says should exist with what the kernel has, and
 * lists every difference in words ("host: rule 2000: from 10.0.1.23/32 lookup 101 missing").
 *
 * @module
 */
import {
  type Link,
  listAddresses,
  listLinks,
  listNeighbours,
  listRoutes,
  listRules,
  type NetlinkSocket,
  readSysctl,
  type Route,
} from "../../netlink/mod.ts";
import type { Sockets } from "./apply.ts";
import {
  describeNeigh,
  describeRoute,
  describeRule,
  type Plan,
  type PlannedRoute,
  type Side,
} from "./plan.ts";

interface SideState {
  links: Link[];
  routes?: Route[];
}

/** Every problem of `plan` on the host and in the pod; [] when all is as planned. */
export function checkPlan(plan: Plan, s: Sockets, parentIndex?: number): string[] {
  const problems: string[] = [];
  const state: Record<Side, SideState> = {
    host: { links: listLinks(s.host) },
    pod: { links: listLinks(s.pod) },
  };
  const sock = (side: Side): NetlinkSocket => (side === "host" ? s.host : s.pod);
  const link = (side: Side, name: string) => state[side].links.find((l) => l.name === name);
  const routes = (side: Side) => (state[side].routes ??= listRoutes(sock(side), { family: 4 }));

  for (const want of plan.links) {
    const l = link(want.side, want.name);
    const where = `${want.side}: link ${want.name}`;
    if (!l) {
      problems.push(`${where} missing`);
      continue;
    }
    if (l.kind !== want.kind) {
      problems.push(`${where} is ${l.kind ?? "a device"}, expected ${want.kind}`);
      continue;
    }
    if (want.ipvlanMode && l.ipvlanMode !== want.ipvlanMode) {
      problems.push(`${where} has ipvlan mode ${l.ipvlanMode}, expected ${want.ipvlanMode}`);
    }
    if (want.kind === "ipvlan" && parentIndex !== undefined && l.parentIndex !== parentIndex) {
      problems.push(
        `${where} is an ipvlan of host ifindex ${l.parentIndex}, expected ${parentIndex}`,
      );
    }
    // The spec lets later plugins in the chain change what we made (tuning sets MTUs), so
    // a pod-side MTU is not ours to hold; the host side is.
    if (want.side === "host" && l.mtu !== want.mtu) {
      problems.push(`${where} has MTU ${l.mtu}, expected ${want.mtu}`);
    }
    if (!l.up) problems.push(`${where} is down`);
  }
  // The host veth must be paired with the pod end the plan names (not some other link).
  const hostVeth = link("host", plan.hostVeth);
  const podEnd = plan.links.find((l) => l.side === "pod" && l.kind === "veth");
  const podEndLink = podEnd && link("pod", podEnd.name);
  if (hostVeth?.kind === "veth" && podEndLink && hostVeth.parentIndex !== podEndLink.index) {
    problems.push(`host: link ${plan.hostVeth} is not the peer of pod link ${podEnd!.name}`);
  }

  for (const step of plan.steps) {
    switch (step.op) {
      case "addr": {
        const l = link(step.side, step.link);
        if (!l) break; // already reported
        const have = listAddresses(sock(step.side), { link: l.index, family: 4 });
        if (!have.some((a) => `${a.address}/${a.prefixLen}` === step.cidr)) {
          problems.push(`${step.side}: address ${step.cidr} on ${step.link} missing`);
        }
        break;
      }
      case "route": {
        const p = routeProblem(step.route, routes(step.side), link(step.side, step.route.dev));
        if (p) problems.push(`${step.side}: ${p}`);
        break;
      }
      case "neigh": {
        const n = step.neigh;
        const l = link(step.side, n.link);
        const macLink = link(n.macOf.side, n.macOf.link);
        if (!l || !macLink) break;
        const have = listNeighbours(sock(step.side), { link: l.index, family: 4 })
          .find((e) => e.ip === n.ip);
        if (!have) problems.push(`${step.side}: ${describeNeigh(n)} missing`);
        else if (!have.state.includes("permanent") || have.mac !== macLink.mac) {
          problems.push(
            `${step.side}: ${describeNeigh(n)} is wrong: ${
              have.mac ?? "no MAC"
            } ${have.state}, expected ${macLink.mac} permanent`,
          );
        }
        break;
      }
      case "rule":
        break; // below, one dump for all
      case "sysctl": {
        if (
          step.side === "pod" && !plan.links.some((l) => l.side === "pod" && link("pod", l.name))
        ) break;
        let v: string;
        try {
          v = readSysctl(step.key, step.side === "pod" ? s.netns : undefined);
        } catch {
          break; // the link it belongs to is missing, already reported
        }
        if (v !== step.value) {
          problems.push(`${step.side}: sysctl ${step.key} is ${v}, expected ${step.value}`);
        }
        break;
      }
    }
  }

  const rules = listRules(s.host, 4);
  for (const step of plan.steps) {
    if (step.op !== "rule") continue;
    const r = step.rule;
    const ok = rules.some((h) =>
      h.priority === r.priority && h.table === r.table && h.src === r.src && h.dst === r.dst &&
      !h.iif && h.oif === r.oif && h.fwmark === undefined && !h.invert
    );
    if (!ok) problems.push(`host: ${describeRule(r)} missing`);
  }
  return problems;
}

/** What is wrong with one planned route, or undefined when it is there as planned. */
export function routeProblem(
  want: PlannedRoute,
  have: Route[],
  dev: Link | undefined,
): string | undefined {
  const text = describeRoute(want);
  if (!dev) return undefined; // its link is missing, already reported
  const same = have.filter((h) =>
    h.dst === want.dst && h.table === want.table && h.type !== "local"
  );
  if (same.length === 0) return `${text} missing`;
  const exact = same.find((h) =>
    h.dev === dev.index && (h.gateway ?? "") === (want.gateway ?? "") &&
    (want.src === undefined || h.src === want.src)
  );
  if (exact) return undefined;
  const h = same[0];
  return `${text} is wrong: found ${h.dst}${
    h.gateway ? ` via ${h.gateway}` : ""
  } dev ifindex ${h.dev}${h.src ? ` src ${h.src}` : ""}`;
}
