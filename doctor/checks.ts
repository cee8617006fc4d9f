/**
 * Checks of the node's address state: warm pools, subnets, the datapath in the kernel,
 * agreement between checkpoint, EC2 and kernel, and leaked ENIs. Checks whose source is
 * unavailable say `skip` and why, rather than guessing.
 *
 * @module
 */
import type { Subnet } from "../aws/ec2.ts";
import { matchesTags, parseSelector } from "../ipam/selector.ts";
import type { CheckResult } from "./report.ts";
import type { Facts } from "./facts.ts";
import type { DatapathFindings } from "./datapath.ts";
import { describeFix } from "./datapath_fix.ts";
import type { LeakedEni } from "./cloud.ts";

/** Warm state per pool: free addresses against targets, and exhaustion. */
export function checkPools(f: Facts): CheckResult {
  const base = { id: "pools", title: "warm pools" };
  if (f.source !== "daemon") return { ...base, status: "skip", found: "needs the daemon" };
  const details: string[] = [];
  let status: CheckResult["status"] = "ok";
  let fix: string | undefined;
  for (const p of f.pools) {
    const line =
      `${p.name}: ${p.free} free, ${p.used} used, ${p.cooling} cooling on ${p.enis} ENIs` +
      (p.wantFree !== undefined ? ` (target ${p.wantFree} free)` : "");
    if (p.exhausted) {
      status = "fail";
      details.push(
        `${line}; cannot grow: ${p.exhausted.reason}${
          p.exhausted.detail ? ` (${p.exhausted.detail})` : ""
        }`,
      );
      fix = p.exhausted.reason === "subnet_full"
        ? "the pool's subnets are full: add a subnet matching its selector, or free addresses " +
          "in them (vpcni doctor subnets)"
        : "the instance's ENI/address limit is reached: lower kubelet --max-pods (vpcni doctor " +
          "maxpods), enable prefix delegation, or use a larger instance type";
    } else if (p.wantFree !== undefined && p.free < p.wantFree) {
      if (status === "ok") status = "warn";
      details.push(`${line}; below target${p.growing ? ", growing" : ""}`);
      fix ??= "the pool is refilling; if it stays below target, see the subnets and EC2 checks";
    } else details.push(line);
  }
  const found = f.pools.length === 0
    ? "the daemon reports no pools"
    : f.pools.map((p) => `${p.name} ${p.free} free`).join(", ");
  return { ...base, status, found, details: status === "ok" ? undefined : details, fix };
}

/** The subnets each pool may use, by its selector (node / ids / tags), in the node's AZ. */
export function poolSubnets(f: Facts, subnets: Subnet[]): Map<string, Subnet[]> {
  const out = new Map<string, Subnet[]>();
  const primary = f.metadata?.enis.find((e) => e.deviceIndex === 0)?.subnetId;
  for (const p of f.config.pools) {
    const sel = p.subnets as unknown;
    let match: Subnet[];
    if (sel === undefined || sel === "node") match = subnets.filter((s) => s.subnetId === primary);
    else if (typeof sel === "object" && sel && "ids" in sel) {
      const ids = (sel as { ids: string[] }).ids;
      match = subnets.filter((s) => ids.includes(s.subnetId));
    } else if (typeof sel === "object" && sel && "tags" in sel) {
      try {
        const parsed = parseSelector((sel as { tags: string }).tags);
        match = subnets.filter((s) => matchesTags(parsed, s.tags));
      } catch {
        match = [];
      }
    } else match = [];
    out.set(p.name, match);
  }
  return out;
}

/** Free addresses per subnet the pools can use. */
export function checkSubnets(f: Facts, subnets: Subnet[] | string): CheckResult {
  const base = { id: "subnets", title: "subnets" };
  if (typeof subnets === "string") return { ...base, status: "skip", found: subnets };
  const byPool = poolSubnets(f, subnets);
  const details: string[] = [];
  let status: CheckResult["status"] = "ok";
  let fix: string | undefined;
  for (const [pool, list] of byPool) {
    if (list.length === 0) {
      status = "fail";
      details.push(`pool ${pool}: no subnet in ${f.metadata?.az ?? "the AZ"} matches its selector`);
      fix = "fix the pool's subnets selector, or tag a subnet of this AZ to match it";
      continue;
    }
    const free = list.reduce((n, s) => n + s.availableIpCount, 0);
    const names = list.map((s) => `${s.subnetId} ${s.cidr} ${s.availableIpCount} free`).join(", ");
    const poolFree = f.pools.find((p) => p.name === pool)?.free;
    if (free === 0) {
      status = "fail";
      details.push(`pool ${pool}: every subnet is full (${names})`);
      fix = "add a subnet (or a secondary VPC CIDR) that matches the pool's selector, or free " +
        "addresses in these subnets; new pods of this pool get no address" +
        (poolFree ? ` once its ${poolFree} warm addresses are used` : "");
    } else if (free < 16) {
      if (status === "ok") status = "warn";
      details.push(`pool ${pool}: only ${free} addresses left (${names})`);
      fix ??= "plan more address space for this pool's subnets";
    } else details.push(`pool ${pool}: ${names}`);
  }
  const found = [...byPool].map(([p, l]) =>
    `${p} ${l.reduce((n, s) => n + s.availableIpCount, 0)} free in ${l.length} subnet(s)`
  ).join(", ");
  return { ...base, status, found, details: status === "ok" ? undefined : details, fix };
}

/** Datapath objects present for every allocation; no orphans; sysctls as needed. */
export function checkDatapath(f: Facts, d: DatapathFindings | string): CheckResult {
  const base = { id: "datapath", title: "datapath" };
  if (typeof d === "string") return { ...base, status: "skip", found: d };
  const details = [
    ...d.missing.map((m) => `${m.ip} (${m.containerId.slice(0, 12)}): ${m.what}`),
    ...d.sysctl,
    ...d.goneNetns.map((a) =>
      `${a.ip} (${
        a.containerId.slice(0, 12)
      }): pod netns ${a.netns} is gone but the address is held`
    ),
    ...d.orphans.map((o) => o.text),
    ...d.held.map((ip) => `${ip}: routed to a pod no allocation names; held, not an orphan`),
    ...d.unjudged.map((ip) => `${ip}: routed to a pod that may be running; not judged`),
  ];
  // Addresses of pods the allocations do not name (a lost checkpoint): never a failure of
  // their own, and never something to remove by hand.
  const podParts = [
    d.held.length ? `${d.held.length} address(es) held for pods no allocation names` : "",
    d.unjudged.length
      ? `cannot judge ${d.unjudged.length} pod address(es): no daemon, no checkpoint`
      : "",
  ].filter(Boolean);
  const podFixes = [
    d.held.length ? "leave held addresses be: each comes back when its pod is deleted" : "",
    d.unjudged.length ? startDaemonFix(f) + " (it rebuilds its state), then run doctor again" : "",
  ].filter(Boolean);
  // Sysctls are set by the first ADD: with no pods yet, a wrong value is not a failure.
  const sysctlFails = d.sysctl.length > 0 && f.allocations.length > 0;
  if (d.missing.length > 0 || sysctlFails) {
    const fixes: string[] = [];
    const parts: string[] = [];
    if (d.missing.length > 0) {
      parts.push(
        `${d.missing.length} object(s) missing for ${new Set(d.missing.map((m) => m.ip)).size} ` +
          `allocation(s)`,
      );
      fixes.push(
        "recreate the affected pods (kubectl delete pod …; the runtime re-runs ADD), " +
          "and check kernel messages for who removed the objects",
      );
    }
    if (sysctlFails) {
      parts.push(`${d.sysctl.length} sysctl problem(s)`);
      fixes.push(
        "set the sysctls as listed (sysctl -w net.ipv4.ip_forward=1; rp_filter=2 on " +
          "secondary ENIs) and persist them in /etc/sysctl.d",
      );
    }
    return {
      ...base,
      status: "fail",
      found: [...parts, ...podParts].join(", "),
      details,
      fix: [...fixes, ...podFixes].join("; "),
    };
  }
  if (
    d.orphans.length > 0 || d.goneNetns.length > 0 || d.sysctl.length > 0 || podParts.length > 0
  ) {
    return {
      ...base,
      status: "warn",
      found: [
        d.orphans.length ? `${d.orphans.length} orphan object(s)` : "",
        d.goneNetns.length ? `${d.goneNetns.length} allocation(s) without netns` : "",
        d.sysctl.length
          ? `${d.sysctl.length} sysctl(s) not yet as the datapath needs (no pods)`
          : "",
        ...podParts,
      ].filter(Boolean).join(", "),
      details,
      fix: [
        d.orphans.length > 0
          ? `vpcni doctor datapath --fix removes them (${
            d.orphans.slice(0, 2).map(describeFix).join("; ")
          })`
          : d.goneNetns.length > 0
          ? "the runtime's next GC releases them; or delete the pods"
          : d.sysctl.length > 0
          ? "none needed: the first pod ADD sets them"
          : "",
        ...podFixes,
      ].filter(Boolean).join("; "),
    };
  }
  return {
    ...base,
    status: "ok",
    found: `${f.allocations.length} allocation(s) complete; no orphans; sysctls as needed`,
  };
}

/** The checkpoint, the daemon, EC2/IMDS and the kernel agree on who holds what. */
export function checkConsistency(
  f: Facts,
  assigned: Map<string, string[]> | undefined,
  netnsExists: (p: string) => boolean,
): CheckResult {
  const base = { id: "consistency", title: "checkpoint/EC2/kernel" };
  const problems: string[] = [];
  const byIp = new Map<string, string[]>();
  for (const a of f.allocations) {
    byIp.set(a.ip, [...(byIp.get(a.ip) ?? []), a.containerId.slice(0, 12)]);
  }
  for (const [ip, holders] of byIp) {
    if (holders.length > 1) {
      problems.push(`${ip} is held by ${holders.length} pods: ${holders.join(", ")}`);
    }
  }
  if (f.source === "daemon" && f.checkpoint) {
    const settled = Date.now() - 5000;
    const onDisk = new Set(
      f.checkpoint.allocations.map((a) => `${a.containerId}/${a.ifName}/${a.ip}`),
    );
    for (const a of f.allocations) {
      const t = (a as { time?: number }).time ?? 0;
      if (t < settled && !onDisk.has(`${a.containerId}/${a.ifName}/${a.ip}`)) {
        problems.push(
          `${a.ip} (${a.containerId.slice(0, 12)}) is in the daemon but not in the checkpoint`,
        );
      }
    }
  } else if (f.source === "daemon" && f.checkpointError) {
    problems.push(`checkpoint: ${f.checkpointError}`);
  } else if (f.checkpointNewer !== undefined) {
    // Daemon down on a newer release's checkpoint: this release's daemon will not start on it.
    return {
      ...base,
      status: "fail",
      found: `${f.checkpointError}; the allocations are unknown`,
      fix: `run the release that wrote the checkpoint (schema version ${f.checkpointNewer}); ` +
        "to stay on this one, drain the node, move the file aside, then start the daemon",
    };
  } else if (f.checkpointCorrupt) {
    // Daemon down and its checkpoint unreadable: the daemon will not start on it either.
    return {
      ...base,
      status: "fail",
      found: `${f.checkpointError}; the allocations are unknown`,
      fix: "the daemon does not start on an unreadable checkpoint: keep a copy (vpcni doctor " +
        "bundle -o FILE), move the file aside, then start the daemon; its start-up reconcile " +
        "rebuilds the state from EC2 and the kernel",
    };
  }
  if (assigned) {
    for (const a of f.allocations) {
      const ips = assigned.get(a.eniId);
      if (!ips) problems.push(`${a.ip}: its ENI ${a.eniId} is not attached to this instance`);
      else if (!ips.includes(a.ip)) problems.push(`${a.ip}: not assigned to ${a.eniId} in EC2`);
    }
  }
  for (const a of f.allocations) {
    // A netns the daemon could not see either: doctor cannot tell from the path.
    if (a.netns && !a.netnsHidden && !netnsExists(a.netns)) {
      problems.push(`${a.ip} (${a.containerId.slice(0, 12)}): pod netns ${a.netns} does not exist`);
    }
  }
  const sources = [
    f.source === "daemon" ? "daemon+checkpoint" : "checkpoint",
    assigned ? "EC2/IMDS" : "",
    "kernel",
  ]
    .filter(Boolean).join(", ");
  if (problems.length > 0) {
    const twice = problems.some((p) => p.includes("held by"));
    return {
      ...base,
      status: "fail",
      found: `${problems.length} disagreement(s) between ${sources}`,
      details: problems,
      fix: twice
        ? "stop the daemon, keep a copy of the checkpoint (vpcni doctor bundle), restart it: " +
          "the start-up reconcile makes EC2 the truth"
        : "restart the daemon so its start-up reconcile releases or re-adopts these; " +
          "pods whose netns is gone are released by the runtime's GC",
    };
  }
  return {
    ...base,
    status: "ok",
    found: `${f.allocations.length} allocation(s) agree across ${sources}`,
  };
}

/** ENIs tagged for this cluster that sit detached. */
export function checkLeakedEnis(
  leaked: LeakedEni[] | string,
  graceSeconds: number,
  cluster: string,
  thisInstance: string | undefined,
): CheckResult {
  const base = { id: "leaked-enis", title: "leaked ENIs" };
  if (typeof leaked === "string") return { ...base, status: "skip", found: leaked };
  if (leaked.length === 0) return { ...base, status: "ok", found: `none for cluster ${cluster}` };
  // A collector deletes only its own instance's ENIs, after the grace period; leftovers of
  // other instances (a node that died) wait for a person.
  const stale = leaked.filter((e) =>
    (e.instanceId !== undefined && e.instanceId !== thisInstance) ||
    (e.ageSeconds ?? Infinity) > graceSeconds
  );
  const details = leaked.map((e) =>
    `${e.eniId} in ${e.subnetId}, detached` +
    (e.ageSeconds !== undefined ? `, created ${e.ageSeconds}s ago` : "") +
    (e.instanceId
      ? `, by ${e.instanceId}${e.instanceId === thisInstance ? " (this node)" : ""}`
      : "")
  );
  if (stale.length > 0) {
    const others = stale.filter((e) => e.instanceId !== undefined && e.instanceId !== thisInstance);
    return {
      ...base,
      status: "fail",
      found: `${stale.length} detached ENI(s) of cluster ${cluster}: ${
        stale.map((e) => e.eniId).join(", ")
      }`,
      details,
      fix: (others.length > 0
        ? `${others[0].eniId} was left by ${others[0].instanceId}, whose collector no longer runs; `
        : "this node's collector should have deleted it: check the daemon and its " +
          "DeleteNetworkInterface permission; ") +
        `delete with: aws ec2 delete-network-interface --network-interface-id ${stale[0].eniId}`,
    };
  }
  return {
    ...base,
    status: "warn",
    found: `${leaked.length} detached ENI(s) of this node within the ${graceSeconds}s grace`,
    details,
    fix: "none yet: the daemon's collector deletes them after the grace period",
  };
}

/**
 * How to get a daemon running again so doctor can judge: as is, after moving a corrupt
 * checkpoint aside, or the release that wrote a newer one.
 */
export function startDaemonFix(f: Pick<Facts, "checkpointCorrupt" | "checkpointNewer">): string {
  if (f.checkpointNewer !== undefined) {
    return "start the daemon of the release that wrote the checkpoint " +
      `(schema version ${f.checkpointNewer})`;
  }
  return f.checkpointCorrupt ? "move the checkpoint aside, start the daemon" : "start the daemon";
}
