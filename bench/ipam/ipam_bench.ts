/**
 * bench/ipam: `vpcni serve` against a reimplementation of the AWS VPC CNI's default warm
 * policy (WARM_ENI_TARGET=1), side by side in one run, on one simulator with AWS-like
 * latencies (CreateNetworkInterface ≈ 1 s, attach ≈ 3.5 s (2–5 s), AssignPrivateIpAddresses
 * ≈ 0.3 s) and AWS's request-rate buckets.
 *
 * All AWS time is scaled by VPCNI_BENCH_SCALE (default 0.1: a 1 s call takes 100 ms, pods
 * arrive 10× faster, periods and cooldowns are 10× shorter, buckets refill 10× faster);
 * waits are reported back in AWS seconds (measured ÷ scale).
 *
 * Phases, per instance type (VPCNI_BENCH_TYPES, default m5.xlarge,m5.4xlarge):
 * 1. scale-up 0 → N pods at 5 pods/s, N = max pods − 2 host-network pods;
 * 2. down to N/3 pods, then steady churn for 120 AWS-seconds at 1 pod/s (one DEL + one ADD
 *    per tick; 5 pods/s with a 30 s cooldown would need more addresses than an m5.xlarge has);
 * then, on the last type, vpcni alone: an hour-equivalent of churn (3 600 ADD/DEL pairs at
 * 1 pod/s, VPCNI_BENCH_HOUR_FRACTION shortens it) and the daemon's RSS afterwards.
 * VPCNI_BENCH_V8_FLAGS (comma-separated) runs the daemon under those V8 flags.
 *
 *   deno run -A bench/ipam/ipam_bench.ts [--write bench/ipam/RESULTS.md]
 *
 * @module
 */
import { startSim } from "../../aws/sim/mod.ts";
import { embeddedLimits, maxPods } from "../../aws/limits.ts";
import { createAwsCloud } from "../../ipam/aws_cloud.ts";
import {
  addReq,
  delReq,
  ipamClient,
  standardScenario,
  SUBNETS,
  tempRoot,
} from "../../tests/ipam/harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "../../tests/ipam/daemon_process.ts";
import { AwsCniWarmEniBaseline } from "./aws_cni_baseline.ts";

const S = Number(Deno.env.get("VPCNI_BENCH_SCALE") ?? 0.1);
const TYPES = (Deno.env.get("VPCNI_BENCH_TYPES") ?? "m5.xlarge,m5.4xlarge").split(",");
const HOUR_FRACTION = Number(Deno.env.get("VPCNI_BENCH_HOUR_FRACTION") ?? 1);
// V8 flags for the daemon child (DENO_V8_FLAGS), as `deno compile --v8-flags=…` would bake them.
const DAEMON_V8_FLAGS = Deno.env.get("VPCNI_BENCH_V8_FLAGS") ?? "";
const RATE = 5; // pods per AWS-second during scale-up
// Churn runs at 1 pod/s: with AWS's 30 s cooldown, 5 pods/s would keep 150 addresses
// cooling, more than an m5.xlarge holds at all — for either contender.
const CHURN_RATE = 1;
const PEER_INSTANCE = "i-0ccccccccccccccc3";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Contender {
  add(pod: string): Promise<{ ip: string; ms: number }>;
  del(pod: string, ip: string): Promise<void>;
  stop(): Promise<void>;
}

interface PhaseResult {
  adds: number;
  waited: number;
  p50: number;
  p99: number;
  failed: number;
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

// An ADD "waited on EC2" when it took longer than the fast path can: 25 ms wall covers an
// RPC plus a checkpoint fsync on this disk with room to spare.
const WAITED_MS = 25;

async function runLoad(
  c: Contender,
  o: { adds: number; dels: boolean; live: Map<string, string>; prefix: string; rate: number },
): Promise<PhaseResult> {
  const tickMs = (1000 / o.rate) * S;
  const waits: number[] = [];
  let failed = 0;
  const pending: Promise<void>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < o.adds; i++) {
    const due = t0 + i * tickMs;
    const now = performance.now();
    if (due > now) await sleep(due - now);
    if (o.dels && o.live.size > 0) {
      const [pod, ip] = o.live.entries().next().value!;
      o.live.delete(pod);
      pending.push(c.del(pod, ip));
    }
    const pod = `${o.prefix}${i}`;
    pending.push(
      c.add(pod).then(
        (r) => {
          o.live.set(pod, r.ip);
          if (r.ms > WAITED_MS) waits.push(r.ms / S / 1000);
        },
        () => void failed++,
      ),
    );
  }
  await Promise.all(pending);
  return {
    adds: o.adds,
    waited: waits.length,
    p50: quantile(waits, 0.5),
    p99: quantile(waits, 0.99),
    failed,
  };
}

function ec2Snapshot(sim: Awaited<ReturnType<typeof startSim>>) {
  let calls = 0;
  for (const n of sim.stats.ec2.values()) calls += n;
  let mutating = 0;
  for (const [a, n] of sim.stats.ec2) if (!a.startsWith("Describe")) mutating += n;
  let throttles = 0;
  for (const [k, n] of sim.stats.errors) if (k.endsWith(":RequestLimitExceeded")) throttles += n;
  return { calls, mutating, throttles };
}

async function vpcniContender(sim: Awaited<ReturnType<typeof startSim>>, root: string) {
  const port = randomPort();
  const config = await writeChildConfig(root, sim, port, {
    logLevel: "warning",
    reconcileIntervalSeconds: 5 * S,
    releaseDelaySeconds: 60 * S,
    imdsCheckSeconds: 60 * S,
    ec2ResyncSeconds: 600 * S,
    leakedEniGraceSeconds: 300 * S,
    addTimeoutSeconds: 60,
    pools: [{ name: "default", ipCooldownSeconds: 30 * S }],
  });
  const daemon = spawnDaemon(
    root,
    config,
    port,
    DAEMON_V8_FLAGS ? { DENO_V8_FLAGS: DAEMON_V8_FLAGS } : {},
  );
  await daemon.ready(60_000);
  const client = ipamClient(`${root}/ipam.sock`);
  const contender: Contender = {
    async add(pod) {
      const t = performance.now();
      const r = await client.call(addReq(pod));
      if (!r.ok || !("allocation" in r)) throw new Error(JSON.stringify(r));
      return { ip: r.allocation.ip, ms: performance.now() - t };
    },
    async del(pod) {
      await client.call(delReq(pod));
    },
    async stop() {
      await daemon.stop();
    },
  };
  return { contender, daemon };
}

async function peerContender(sim: Awaited<ReturnType<typeof startSim>>) {
  const cloud = await createAwsCloud({
    ec2Endpoint: sim.ec2Endpoint,
    imdsEndpoint: sim.imdsEndpointFor(PEER_INSTANCE),
  });
  const peer = new AwsCniWarmEniBaseline(cloud, S);
  await peer.start();
  const contender: Contender = {
    async add() {
      const r = await peer.add();
      // The same RPC + checkpoint cost the daemon pays is not charged to the peer.
      return { ip: r.ip, ms: r.waitedMs };
    },
    del: (_pod, ip) => Promise.resolve(peer.del(ip)),
    stop: () => Promise.resolve(peer.stop()),
  };
  return { contender, cloud };
}

const lines: string[] = [];
const out = (s: string) => {
  console.log(s);
  lines.push(s);
};

out(`# bench/ipam — vpcni serve vs AWS VPC CNI warm policy (WARM_ENI_TARGET=1)`);
out("");
out(
  `Simulator latencies: CreateNetworkInterface 1 s, AttachNetworkInterface 0.5 s + 3 s "attaching", ` +
    `AssignPrivateIpAddresses 0.3 s, other calls 50 ms; AWS request-rate buckets on. All AWS time scaled by ${S} ` +
    `(waits below are in AWS seconds). Pods arrive at ${RATE}/s. vpcni runs with its defaults ` +
    `(one pool, warmEnis 1); both start with a cold node.`,
);
out("");
out(
  "| instance | phase | contender | ADDs | ADDs that waited | p50 wait (s) | p99 wait (s) | failed | EC2 calls | mutating | throttled |",
);
out("|---|---|---|---|---|---|---|---|---|---|---|");

let rssLine = "";
for (const type of TYPES) {
  const limits = embeddedLimits(type);
  if (!limits) throw new Error(`unknown instance type ${type}`);
  const n = maxPods(limits, { cap: true, vcpus: type.includes("4xlarge") ? 16 : 4 }) - 2;
  const scenario = standardScenario({ type });
  scenario.instances!.push({
    id: PEER_INSTANCE,
    type,
    subnet: SUBNETS.node,
    az: "us-east-1a",
    securityGroups: ["sg-0a000001"],
  });
  const sim = await startSim({ scenario });
  sim.faults.latencyMs = {
    default: 50 * S,
    CreateNetworkInterface: 1000 * S,
    AttachNetworkInterface: 500 * S,
    AssignPrivateIpAddresses: 300 * S,
    UnassignPrivateIpAddresses: 300 * S,
  };
  sim.faults.attachDelayMs = 3000 * S;
  sim.faults.throttle = true;
  for (const b of Object.values(sim.faults.buckets)) b.refillPerSecond /= S;

  const root = await tempRoot();
  try {
    for (const which of ["vpcni", "aws-cni WARM_ENI_TARGET=1"]) {
      const before = ec2Snapshot(sim);
      const started = which === "vpcni"
        ? await vpcniContender(sim, root)
        : await peerContender(sim);
      const c = started.contender;
      const live = new Map<string, string>();
      const up = await runLoad(c, { adds: n, dels: false, live, prefix: "up", rate: RATE });
      // Down to a third of the node, then let those addresses cool off (not measured).
      for (const [pod, ip] of [...live].slice(0, live.size - Math.floor(n / 3))) {
        live.delete(pod);
        await c.del(pod, ip);
      }
      await sleep(35_000 * S);
      const mid = ec2Snapshot(sim);
      const churn = await runLoad(c, {
        adds: 120 * CHURN_RATE,
        dels: true,
        live,
        prefix: "ch",
        rate: CHURN_RATE,
      });
      const after = ec2Snapshot(sim);
      const row = (phase: string, r: PhaseResult, a: typeof before, b: typeof before) =>
        out(
          `| ${type} | ${phase} | ${which} | ${r.adds} | ${r.waited} | ${r.p50.toFixed(2)} | ${
            r.p99.toFixed(2)
          } | ${r.failed} | ${b.calls - a.calls} | ${b.mutating - a.mutating} | ${
            b.throttles - a.throttles
          } |`,
        );
      row(`scale-up 0→${n}`, up, before, mid);
      row(`churn 120 s at ${CHURN_RATE}/s, ${Math.floor(n / 3)} pods`, churn, mid, after);

      if (which === "vpcni" && type === TYPES[TYPES.length - 1]) {
        const pairs = Math.round(3600 * CHURN_RATE * HOUR_FRACTION);
        const d = (started as Awaited<ReturnType<typeof vpcniContender>>).daemon;
        const rssBefore = d.rssKib();
        const t0 = performance.now();
        const hour = await runLoad(c, {
          adds: pairs,
          dels: true,
          live,
          prefix: "h",
          rate: CHURN_RATE,
        });
        const rss = d.rssKib();
        const m = await (await fetch(`http://127.0.0.1:${d.port}/metrics`)).text();
        const own = m.split("\n").filter((l) =>
          l.startsWith("vpcni_ipam_adds_total") && l.includes('result="waited"')
        )
          .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(" ") + 1)), 0);
        rssLine =
          `vpcni daemon RSS (V8 flags: ${
            DAEMON_V8_FLAGS || "none"
          }) on ${type} after ${pairs} ADD/DEL pairs (${
            (HOUR_FRACTION * 60).toFixed(0)
          } AWS-minutes ` +
          `of churn at ${CHURN_RATE} pod/s, ${
            ((performance.now() - t0) / 1000).toFixed(0)
          } s wall): ` +
          `${(rss / 1024).toFixed(1)} MiB (${
            (rssBefore / 1024).toFixed(1)
          } MiB before the churn); ` +
          `${hour.waited} of ${hour.adds} ADDs took over ${WAITED_MS} ms, ${hour.failed} failed; ` +
          `the daemon counted ${own} ADDs (whole run) that found no free address and waited (for EC2 or a cooldown).`;
      }
      await c.stop();
      if ("cloud" in started) started.cloud.close?.();
    }
  } finally {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}
out("");
out(rssLine);

const w = Deno.args.indexOf("--write");
if (w >= 0) await Deno.writeTextFile(Deno.args[w + 1], lines.join("\n") + "\n");
