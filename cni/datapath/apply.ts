/**
 * Carries out a {@linkcode Plan}: each step in order, each undo recorded as it succeeds.
 * When a step fails, the recorded undos run in reverse and the failure is thrown, so an
 * ADD that fails leaves the host and the pod as they were.
 *
 * @module
 */
import {
  addAddress,
  addRoute,
  addRule,
  createIpvlan,
  createVeth,
  deleteLink,
  deleteRule,
  getLink,
  isExists,
  isNotFound,
  type NetlinkSocket,
  renameLink,
  setLinkUp,
  setNeighbour,
  writeSysctl,
} from "../../netlink/mod.ts";
import { DatapathError } from "./errors.ts";
import {
  describeNeigh,
  describeRoute,
  describeRule,
  type Plan,
  type Side,
  type Step,
} from "./plan.ts";

/** The two netlink sockets of one attachment, and the pod netns path. */
export interface Sockets {
  host: NetlinkSocket;
  pod: NetlinkSocket;
  netns: string;
}

/** Text form of a step for error messages. */
export function describeStep(step: Step): string {
  switch (step.op) {
    case "veth":
      return `host: create veth ${step.hostName} (pod end ${step.podName})`;
    case "ipvlan":
      return `pod: create ipvlan ${step.podName} (mode ${step.mode}, parent ifindex ${step.parentIndex})`;
    case "rename":
      return `pod: rename ${step.from} to ${step.to}`;
    case "up":
      return `${step.side}: set ${step.link} up`;
    case "addr":
      return `${step.side}: add address ${step.cidr} to ${step.link}`;
    case "route":
      return `${step.side}: add ${describeRoute(step.route)}`;
    case "neigh":
      return `${step.side}: add ${describeNeigh(step.neigh)}`;
    case "rule":
      return `host: add ${describeRule(step.rule)}`;
    case "sysctl":
      return `${step.side}: sysctl ${step.key}=${step.value}`;
  }
}

/** Runs every step of `plan`; on failure undoes what was done and throws DatapathError. */
export function applyPlan(plan: Plan, s: Sockets): void {
  const undo: (() => void)[] = [];
  const sock = (side: Side) => (side === "host" ? s.host : s.pod);
  for (const step of plan.steps) {
    try {
      runStep(step, s, sock, undo);
    } catch (e) {
      for (const u of undo.reverse()) {
        try {
          u();
        } catch (ue) {
          // Keep undoing the rest; a link already gone took its objects with it.
          if (!isNotFound(ue)) console.error(`vpcni: undo after failed ADD: ${ue}`);
        }
      }
      throw new DatapathError(describeStep(step), e);
    }
  }
}

/**
 * Queues the removal of the link `name` just made on `sock`. By index: the pod end may be
 * renamed by a later step, and an undo by name would then miss it.
 */
function undoLinkByIndex(sock: NetlinkSocket, name: string, undo: (() => void)[]): void {
  const index = getLink(sock, name).index;
  undo.push(() => deleteLink(sock, index));
}

function runStep(
  step: Step,
  s: Sockets,
  sock: (side: Side) => NetlinkSocket,
  undo: (() => void)[],
): void {
  switch (step.op) {
    case "veth": {
      createVeth(s.host, {
        name: step.hostName,
        peerName: step.podName,
        peerNetns: s.netns,
        mtu: step.mtu,
      });
      // Deleting one end of a veth removes both.
      undoLinkByIndex(s.host, step.hostName, undo);
      return;
    }
    case "ipvlan": {
      createIpvlan(s.host, {
        name: step.podName,
        parent: step.parentIndex,
        mode: step.mode,
        netns: s.netns,
        mtu: step.mtu,
      });
      undoLinkByIndex(s.pod, step.podName, undo);
      return;
    }
    case "rename":
      renameLink(s.pod, step.from, step.to);
      return;
    case "up":
      setLinkUp(sock(step.side), step.link);
      return;
    case "addr":
      addAddress(sock(step.side), step.link, step.cidr);
      return;
    case "route": {
      const r = step.route;
      addRoute(sock(step.side), {
        dst: r.dst,
        gateway: r.gateway,
        dev: r.dev,
        scope: r.scope,
        table: r.table,
        src: r.src,
        onlink: r.onlink,
      });
      return;
    }
    case "neigh": {
      const n = step.neigh;
      const mac = getLink(sock(n.macOf.side), n.macOf.link).mac;
      setNeighbour(sock(step.side), { link: n.link, ip: n.ip, mac });
      return;
    }
    case "rule": {
      const r = step.rule;
      try {
        addRule(s.host, r);
      } catch (e) {
        // Identical rule already there (a DEL that never came): adopt it, don't undo it.
        if (isExists(e)) return;
        throw e;
      }
      undo.push(() => deleteRule(s.host, r));
      return;
    }
    case "sysctl":
      writeSysctl(step.key, step.value, step.side === "pod" ? s.netns : undefined);
      return;
  }
}
