/**
 * bench/fleet: N nodes' IPAM control logic in one process against one simulated account with
 * EC2's per-account request limits, vpcni's node core side by side with the AWS VPC CNI's
 * WARM_ENI_TARGET=1 policy (bench/ipam/aws_cni_baseline.ts), each on a fresh simulator.
 *
 * Scenarios: (a) cold start of N nodes within 2 minutes, 30 pods each at 5 pods/s once the
 * node is up; (b) steady churn of 10 pods/s across the fleet; (c) a rolling restart of every
 * node, 10 % at a time, churn going on; (d) (a) with 10 % of EC2 calls failing (500/503).
 * Reported per scenario: failed ADDs (CNI code 11), p50/p99 time-to-IP (AWS seconds), how
 * long a starting node took to be ready for pods (vpcni: CNI STATUS answers ready, as a
 * containerd 2.x node asks it; the baseline: its start, as ipamd's init), EC2 calls by
 * action, throttled calls, minutes until every node holds its warm target, and memory per
 * node (after (a)).
 *
 *   deno run -A bench/fleet/fleet_bench.ts [--write bench/fleet/RESULTS.md]
 *
 * VPCNI_FLEET_NODES (default 100), VPCNI_FLEET_SCALE (AWS time × scale = wall time, default
 * 0.1), VPCNI_FLEET_CHURN_SECONDS (AWS seconds of (b), default 600), VPCNI_FLEET_SCENARIOS
 * (default abcd), VPCNI_FLEET_SIDES (default vpcni,baseline), VPCNI_FLEET_POOL (JSON merged
 * into vpcni's pool, e.g. '{"prefixDelegation":true}'), VPCNI_FLEET_JITTER_SECONDS (vpcni's
 * startJitterSeconds knob, default the daemon's), VPCNI_FLEET_ADD_TIMEOUT (AWS seconds an ADD
 * may wait before it fails with code 11, both sides; default 20, the daemon's
 * addTimeoutSeconds; at most 118 s take effect, as the installed plugin waits 120 s for an
 * ADD and the daemon keeps 2 s of it for the wiring), VPCNI_FLEET_LAUNCH (JSON: addresses each
 * node's primary ENI gets at launch, '{"secondaryIps":14}' or '{"prefixes":3}'; default none),
 * VPCNI_FLEET_ACCOUNT_SHARE (fraction of EC2's per-account buckets the simulated account has,
 * default 1: 0.1 gives 100 nodes the contention of 1,000).
 *
 * @module
 */
import type { SimServer } from "../../aws/sim/mod.ts";
import {
  baselineSide,
  type FleetNode,
  type FleetSide,
  startFleetSim,
  vpcniSide,
} from "./fleet_world.ts";
import { PhaseRecorder, type PhaseStats, renderReport } from "./fleet_stats.ts";

const env = (k: string, d: string) => Deno.env.get(k) ?? d;
const N = Number(env("VPCNI_FLEET_NODES", "100"));
const S = Number(env("VPCNI_FLEET_SCALE", "0.1"));
const CHURN_SECONDS = Number(env("VPCNI_FLEET_CHURN_SECONDS", "600"));
const SCENARIOS = env("VPCNI_FLEET_SCENARIOS", "abcd");
const SIDES = env("VPCNI_FLEET_SIDES", "vpcni,baseline").split(",");
const POOL = JSON.parse(env("VPCNI_FLEET_POOL", "{}"));
const JITTER_TEXT = Deno.env.get("VPCNI_FLEET_JITTER_SECONDS");
const JITTER = JITTER_TEXT === undefined ? undefined : Number(JITTER_TEXT);
const LAUNCH = JSON.parse(env("VPCNI_FLEET_LAUNCH", "{}"));
const ACCOUNT_SHARE = Number(env("VPCNI_FLEET_ACCOUNT_SHARE", "1"));
const PODS_PER_NODE = 30;
const POD_RATE = 5; // pods per AWS-second on a node coming up
const CHURN_RATE = 10; // pods per AWS-second across the fleet
const BURST_SECONDS = 120; // the autoscaler's burst: every node starts within it
// AWS seconds; 20 is the daemon's default addTimeoutSeconds. The baseline gets the same.
const ADD_TIMEOUT = Number(env("VPCNI_FLEET_ADD_TIMEOUT", "20"));
const WARM_CAP_SECONDS = 600; // give up waiting for every node to be warm after this ("never")

const sleep = (awsMs: number) => new Promise((r) => setTimeout(r, awsMs * S));
const awsNow = () => performance.now() / S;

/** Starts every node within the burst and gives each its pods; returns the nodes. */
async function coldStart(sim: SimServer, side: FleetSide, rec: PhaseRecorder) {
  const nodes: (FleetNode | undefined)[] = new Array(N);
  const t0 = awsNow();
  const podsDone: Promise<void>[] = [];
  await Promise.all([...Array(N)].map(async (_, i) => {
    await sleep(Math.random() * BURST_SECONDS * 1000);
    const started = awsNow();
    const node = await startWithRestarts(() => side.startNode(sim, i), rec);
    if (!node) return;
    rec.nodeReady((awsNow() - started) / 1000);
    nodes[i] = node;
    podsDone.push((async () => {
      const adds: Promise<void>[] = [];
      for (let p = 0; p < PODS_PER_NODE; p++) {
        adds.push(rec.add(node, `n${i}-p${p}`));
        await sleep(1000 / POD_RATE);
      }
      await Promise.all(adds);
    })());
  }));
  await Promise.all(podsDone);
  await waitWarm(nodes, rec, t0);
  return nodes;
}

/**
 * Starts a node as its DaemonSet would: a daemon that exits at start is started again after
 * a back-off (10 s, doubling, 5 tries), each failed start counted.
 */
async function startWithRestarts(
  start: () => Promise<FleetNode>,
  rec: PhaseRecorder,
): Promise<FleetNode | undefined> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await start();
    } catch (e) {
      rec.nodeFailed(String(e));
      await sleep(10_000 * 2 ** attempt);
    }
  }
  return undefined;
}

/** Waits until every node holds its warm target; records the minutes since `t0`. */
async function waitWarm(nodes: (FleetNode | undefined)[], rec: PhaseRecorder, t0: number) {
  while (awsNow() - t0 < WARM_CAP_SECONDS * 1000) {
    if (nodes.every((n) => n?.atWarmTarget() ?? true)) {
      rec.warmAfterMinutes = (awsNow() - t0) / 60_000;
      return;
    }
    await sleep(1000);
  }
}

/** One churn step: DEL a random pod of a random node that is up, ADD a new pod there. */
function churnStep(nodes: (FleetNode | undefined)[], rec: PhaseRecorder, k: number) {
  const up = nodes.filter((n): n is FleetNode => n !== undefined);
  const node = up[Math.floor(Math.random() * up.length)];
  if (!node) return Promise.resolve();
  const pods = node.pods();
  const victim = pods[Math.floor(Math.random() * pods.length)];
  const del = victim ? node.del(victim).catch((e) => rec.delFailed(e)) : Promise.resolve();
  return del.then(() => rec.add(node, `c${k}-${Math.random().toString(36).slice(2, 8)}`));
}

async function churn(nodes: (FleetNode | undefined)[], rec: PhaseRecorder, seconds: number) {
  const t0 = awsNow();
  const steps: Promise<void>[] = [];
  const total = Math.round(seconds * CHURN_RATE);
  for (let k = 0; k < total; k++) {
    const due = t0 + (k * 1000) / CHURN_RATE;
    if (due > awsNow()) await sleep(due - awsNow());
    steps.push(churnStep(nodes, rec, k));
  }
  await Promise.all(steps);
  await waitWarm(nodes, rec, t0);
}

/** Restarts every node, 10 % at a time (a DaemonSet's maxUnavailable), churn going on. */
async function rollingRestart(
  sim: SimServer,
  side: FleetSide,
  nodes: (FleetNode | undefined)[],
  rec: PhaseRecorder,
) {
  const t0 = awsNow();
  const batch = Math.max(1, Math.ceil(N / 10));
  let stopChurn = false;
  const background = (async () => {
    const steps: Promise<void>[] = [];
    for (let k = 0; !stopChurn; k++) {
      steps.push(churnStep(nodes, rec, 1_000_000 + k));
      await sleep(1000 / CHURN_RATE);
    }
    await Promise.all(steps);
  })();
  for (let first = 0; first < N; first += batch) {
    const ids = [...Array(Math.min(batch, N - first))].map((_, j) => first + j);
    await Promise.all(ids.map(async (i) => {
      const old = nodes[i];
      nodes[i] = undefined;
      await old?.stop();
      nodes[i] = await startWithRestarts(() => side.startNode(sim, i, old), rec);
    }));
  }
  stopChurn = true;
  await background;
  await waitWarm(nodes, rec, t0);
}

/** Memory after a full collection when the runtime allows one (`--v8-flags=--expose-gc`). */
function settledMemory() {
  (globalThis as { gc?: () => void }).gc?.();
  return Deno.memoryUsage();
}

/** The daemons' counters summed over the nodes (undefined for the baseline). */
async function sumCounters(nodes: (FleetNode | undefined)[]) {
  const out: Record<string, number> = {};
  for (const n of nodes) {
    for (const [k, v] of Object.entries(await n?.counters?.() ?? {})) out[k] = (out[k] ?? 0) + v;
  }
  return Object.keys(out).length ? out : undefined;
}

async function stopAll(nodes: (FleetNode | undefined)[]) {
  await Promise.all(nodes.map((n) => n?.stop()));
}

const results: PhaseStats[] = [];
const root = await Deno.makeTempDir({
  dir: (await Deno.stat("/dev/shm").catch(() => undefined)) ? "/dev/shm" : undefined,
  prefix: "vpcni-fleet-",
});
const wallStart = performance.now();
const sides: Record<string, (dir: string) => FleetSide> = {
  vpcni: (dir) =>
    vpcniSide(dir, {
      scale: S,
      addTimeoutSeconds: ADD_TIMEOUT,
      pool: POOL,
      startJitterSeconds: JITTER,
    }),
  baseline: () => baselineSide({ scale: S, addTimeoutSeconds: ADD_TIMEOUT }),
};

try {
  for (const withErrors of [false, true]) {
    const wanted = withErrors ? SCENARIOS.includes("d") : /[abc]/.test(SCENARIOS);
    if (!wanted) continue;
    for (const sideName of SIDES) {
      const dir = `${root}/${sideName}-${withErrors ? "d" : "abc"}`;
      const side = sides[sideName](dir);
      const sim = await startFleetSim(N, S, withErrors ? 0.1 : 0, LAUNCH, ACCOUNT_SHARE);
      const phase = (name: string) => new PhaseRecorder(name, side.name, sim, S);
      try {
        const a = phase(
          withErrors ? `(d) cold start of ${N}, 10 % errors` : `(a) cold start of ${N}`,
        );
        const heapBefore = settledMemory().heapUsed;
        const nodes = await coldStart(sim, side, a);
        const after = settledMemory();
        a.memoryPerNodeKib = (after.heapUsed - heapBefore) / 1024 / N;
        a.rssMib = after.rss / 1024 / 1024;
        a.daemonCounters = await sumCounters(nodes);
        results.push(a.finish());
        if (!withErrors && SCENARIOS.includes("b")) {
          const b = phase(`(b) churn ${CHURN_RATE}/s for ${CHURN_SECONDS} s`);
          await churn(nodes, b, CHURN_SECONDS);
          results.push(b.finish());
        }
        if (!withErrors && SCENARIOS.includes("c")) {
          const c = phase(`(c) rolling restart, 10 % at a time`);
          await rollingRestart(sim, side, nodes, c);
          results.push(c.finish());
        }
        await stopAll(nodes);
      } finally {
        await sim.close();
      }
    }
  }
} finally {
  await Deno.remove(root, { recursive: true }).catch(() => {});
}

const text = renderReport(results, {
  nodes: N,
  scale: S,
  wallSeconds: (performance.now() - wallStart) / 1000,
  pool: POOL,
  jitterSeconds: JITTER,
  launch: LAUNCH,
  addTimeoutSeconds: ADD_TIMEOUT,
  accountShare: ACCOUNT_SHARE,
});
console.log(text);
const w = Deno.args.indexOf("--write");
if (w >= 0) await Deno.writeTextFile(Deno.args[w + 1], text + "\n");
Deno.exit(0);
