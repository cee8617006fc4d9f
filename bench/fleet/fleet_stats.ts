/**
 * Measuring one phase of the fleet bench: ADD outcomes and times, the simulator's EC2
 * counters over the phase, how late the event loop ran (whether the machine kept up with
 * the scaled clock), and the markdown report.
 *
 * @module
 */
import type { SimServer } from "../../aws/sim/mod.ts";
import type { FleetNode } from "./fleet_world.ts";

/** What one phase of one side measured. */
export interface PhaseStats {
  phase: string;
  side: string;
  adds: number;
  failed: number;
  nodeStartsFailed: number;
  /** DELs the daemon answered with an error (the first one's message is logged). */
  delsFailed: number;
  /** Time-to-IP quantiles in AWS seconds. */
  p50: number;
  p99: number;
  /** AWS seconds from a node's start until it took pods (cold start phases only). */
  readyP50?: number;
  readyP99?: number;
  calls: Record<string, number>;
  throttled: number;
  otherErrors: number;
  /** Minutes from the phase's start until every node held its warm target (undefined: never). */
  warmAfterMinutes?: number;
  /** Live JS heap per node after a full collection (the simulator's share of it included). */
  memoryPerNodeKib?: number;
  /** The process's RSS at the same moment. */
  rssMib?: number;
  wallSeconds: number;
  /** 99th percentile of event-loop lateness in wall ms (large: the clock did not hold). */
  loopLagP99Ms: number;
  /** The daemons' own counters summed over the nodes (vpcni: ENI deletes, failed growths). */
  daemonCounters?: Record<string, number>;
}

/** The q-quantile of `xs` (0 for none). */
export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

function snapshot(sim: SimServer) {
  return { ec2: new Map(sim.stats.ec2), errors: new Map(sim.stats.errors) };
}

/** Records one phase; `finish` computes its {@linkcode PhaseStats}. */
export class PhaseRecorder {
  warmAfterMinutes?: number;
  memoryPerNodeKib?: number;
  rssMib?: number;
  daemonCounters?: Record<string, number>;
  #times: number[] = [];
  #ready: number[] = [];
  #failed = 0;
  #nodeFailures: string[] = [];
  #delsFailed = 0;
  #before: ReturnType<typeof snapshot>;
  #start = performance.now();
  #lags: number[] = [];
  #timer: ReturnType<typeof setInterval>;

  constructor(
    readonly phase: string,
    readonly side: string,
    readonly sim: SimServer,
    readonly scale: number,
  ) {
    this.#before = snapshot(sim);
    let last = performance.now();
    this.#timer = setInterval(() => {
      const t = performance.now();
      this.#lags.push(Math.max(0, t - last - 50));
      last = t;
    }, 50);
    console.error(`[fleet] ${side}: ${phase}`);
  }

  /** Sends an ADD of `pod` to `node` and records its outcome and time. */
  async add(node: FleetNode, pod: string): Promise<void> {
    const t = performance.now();
    const ok = await node.add(pod).catch(() => false);
    if (ok) this.#times.push((performance.now() - t) / this.scale / 1000);
    else this.#failed++;
  }

  /** A node took `awsSeconds` from its start until it was ready for pods. */
  nodeReady(awsSeconds: number): void {
    this.#ready.push(awsSeconds);
  }

  /** A DEL that failed. */
  delFailed(e: unknown): void {
    if (this.#delsFailed++ === 0) console.error(`[fleet] DEL failed: ${e}`);
  }

  /** A daemon start that failed (the node's daemon is started again). */
  nodeFailed(why: string): void {
    if (this.#nodeFailures.length < 3) console.error(`[fleet] node start failed: ${why}`);
    this.#nodeFailures.push(why);
  }

  /** Stops the lag sampler and computes the phase's figures. */
  finish(): PhaseStats {
    clearInterval(this.#timer);
    const after = snapshot(this.sim);
    const calls: Record<string, number> = {};
    for (const [a, n] of after.ec2) {
      const d = n - (this.#before.ec2.get(a) ?? 0);
      if (d > 0) calls[a] = d;
    }
    let throttled = 0;
    let otherErrors = 0;
    for (const [k, n] of after.errors) {
      const d = n - (this.#before.errors.get(k) ?? 0);
      if (k.endsWith(":RequestLimitExceeded")) throttled += d;
      else otherErrors += d;
    }
    const s: PhaseStats = {
      phase: this.phase,
      side: this.side,
      adds: this.#times.length + this.#failed,
      failed: this.#failed,
      nodeStartsFailed: this.#nodeFailures.length,
      delsFailed: this.#delsFailed,
      p50: quantile(this.#times, 0.5),
      p99: quantile(this.#times, 0.99),
      ...(this.#ready.length
        ? { readyP50: quantile(this.#ready, 0.5), readyP99: quantile(this.#ready, 0.99) }
        : {}),
      calls,
      throttled,
      otherErrors,
      warmAfterMinutes: this.warmAfterMinutes,
      memoryPerNodeKib: this.memoryPerNodeKib,
      rssMib: this.rssMib,
      wallSeconds: (performance.now() - this.#start) / 1000,
      loopLagP99Ms: quantile(this.#lags, 0.99),
      daemonCounters: this.daemonCounters,
    };
    console.error(`[fleet] ${JSON.stringify(s)}`);
    return s;
  }
}

const SHORT: Record<string, string> = {
  CreateNetworkInterface: "Create",
  AttachNetworkInterface: "Attach",
  DetachNetworkInterface: "Detach",
  DeleteNetworkInterface: "Delete",
  ModifyNetworkInterfaceAttribute: "Modify",
  AssignPrivateIpAddresses: "Assign",
  UnassignPrivateIpAddresses: "Unassign",
  DescribeNetworkInterfaces: "DescENI",
  DescribeInstanceTypes: "DescTypes",
  DescribeSubnets: "DescSubnets",
};

/** The report as markdown: one row per phase and side. */
export function renderReport(
  rows: PhaseStats[],
  o: {
    nodes: number;
    scale: number;
    wallSeconds: number;
    pool: Record<string, unknown>;
    jitterSeconds: number | undefined;
    launch: Record<string, unknown>;
    addTimeoutSeconds: number;
    /** Fraction of EC2's per-account buckets the simulated account has. */
    accountShare: number;
  },
): string {
  const total = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);
  const lines = [
    `# bench/fleet — ${o.nodes} nodes on one account: vpcni node cores vs the AWS VPC CNI's WARM_ENI_TARGET=1`,
    "",
    `m5.xlarge nodes; the simulator's account limits on (ENI/IP actions 100 burst, 5/s; other ` +
    `mutating 50, 5/s; Describe 100, 20/s${
      o.accountShare === 1 ? "" : `; each × ${o.accountShare}`
    }); AWS-like latencies as bench/ipam. AWS time × ` +
    `${o.scale} = wall time. vpcni pool: ${JSON.stringify({ warmEnis: 1, ...o.pool })}, ` +
    `startJitterSeconds ${o.jitterSeconds ?? "default (120)"}; primary ENI at launch: ${
      Object.keys(o.launch).length ? JSON.stringify(o.launch) : "no secondary addresses"
    }; an ADD fails (code 11) after ${o.addTimeoutSeconds} s. Whole run: ${
      o.wallSeconds.toFixed(0)
    } s wall.`,
    "",
    "| scenario | contender | ADDs | failed (code 11) | p50 time-to-IP (s) | p99 (s) | node ready p50 / p99 (s) | EC2 calls | throttled | other errors | every node warm after (min from phase start) | heap/node (KiB) | process RSS (MiB) | wall (s) | loop lag p99 (ms) |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.phase} | ${r.side} | ${r.adds} | ${r.failed}${
        r.nodeStartsFailed ? ` (${r.nodeStartsFailed} daemon starts failed, restarted)` : ""
      }${r.delsFailed ? ` (${r.delsFailed} DELs failed)` : ""} | ${r.p50.toFixed(2)} | ${
        r.p99.toFixed(2)
      } | ${
        r.readyP50 === undefined ? "" : `${r.readyP50.toFixed(1)} / ${r.readyP99!.toFixed(1)}`
      } | ${total(r.calls)} | ${r.throttled} | ${r.otherErrors} | ${
        r.warmAfterMinutes === undefined ? "never" : r.warmAfterMinutes.toFixed(1)
      } | ${r.memoryPerNodeKib === undefined ? "" : r.memoryPerNodeKib.toFixed(0)} | ${
        r.rssMib === undefined ? "" : r.rssMib.toFixed(0)
      } | ${r.wallSeconds.toFixed(0)} | ${r.loopLagP99Ms.toFixed(0)} |`,
    );
  }
  lines.push("", "EC2 calls by action (every attempt, throttled ones included):", "");
  lines.push("| scenario | contender | calls by action |", "|---|---|---|");
  for (const r of rows) {
    const by = Object.entries(r.calls).sort((a, b) => b[1] - a[1])
      .map(([a, n]) => `${SHORT[a] ?? a} ${n}`).join(", ");
    lines.push(`| ${r.phase} | ${r.side} | ${by} |`);
  }
  const counted = rows.filter((r) => r.daemonCounters && Object.keys(r.daemonCounters).length);
  if (counted.length) {
    lines.push("", "The daemons' counters, summed over the nodes:", "");
    lines.push("| scenario | contender | counters |", "|---|---|---|");
    for (const r of counted) {
      const by = Object.entries(r.daemonCounters!).sort((a, b) => b[1] - a[1])
        .map(([k, n]) => `${k} ${n}`).join(", ");
      lines.push(`| ${r.phase} | ${r.side} | ${by} |`);
    }
  }
  return lines.join("\n");
}
