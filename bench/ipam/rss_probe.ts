/**
 * Quick probe of `vpcni serve`'s resident memory under different V8 flags: for each flag set,
 * the daemon runs as a child process against the simulator (loops scaled like the bench:
 * reconcile 0.5 s, EC2 re-sync 6 s), takes `PAIRS` ADD/DEL pairs at `RATE` per second, and
 * its RSS is read from /proc at ready, after the churn and after a few idle seconds. Each
 * flag set runs twice and the second run is reported: the first one fills Deno's code cache
 * for that flag set (V8 rejects a cache made under other flags).
 *
 * Usage: `deno run -A bench/ipam/rss_probe.ts [FLAGS …]` where each FLAGS is a comma-separated
 * V8 flag list ("" for none); VPCNI_PROBE_PAIRS, VPCNI_PROBE_RATE; VPCNI_PROBE_ENV
 * (`NAME=value,NAME2=value`) is passed to every daemon run (e.g. `MALLOC_ARENA_MAX=2`);
 * VPCNI_PROBE_CONFIG (JSON) is merged into the daemon's configuration (e.g.
 * `{"cniWorkerIdleSeconds":0}`); VPCNI_PROBE_IDLE_SECONDS (default 5) is the idle wait after
 * the churn; VPCNI_PROBE_WRAPPER is a command the daemon's argv is handed to (it ends by
 * exec'ing it, or another form of the program, such as the image's bundle).
 *
 * @module
 */
import { startSim } from "../../aws/sim/mod.ts";
import { ipamClient, standardScenario, tempRoot } from "../../tests/ipam/harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "../../tests/ipam/daemon_process.ts";

const PAIRS = Number(Deno.env.get("VPCNI_PROBE_PAIRS") ?? 600);
const RATE = Number(Deno.env.get("VPCNI_PROBE_RATE") ?? 10);
const FLAG_SETS = Deno.args.length ? Deno.args : ["", "--max-semi-space-size=1"];
const EXTRA_ENV: Record<string, string> = Object.fromEntries(
  (Deno.env.get("VPCNI_PROBE_ENV") ?? "").split(",").filter(Boolean).map((kv) => {
    const i = kv.indexOf("=");
    return [kv.slice(0, i), kv.slice(i + 1)];
  }),
);
const EXTRA_CONFIG = JSON.parse(Deno.env.get("VPCNI_PROBE_CONFIG") ?? "{}") as Record<
  string,
  unknown
>;
const WRAPPER = (Deno.env.get("VPCNI_PROBE_WRAPPER") ?? "").split(" ").filter(Boolean);
const IDLE_SECONDS = Number(Deno.env.get("VPCNI_PROBE_IDLE_SECONDS") ?? 5);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (kib: number) => (kib / 1024).toFixed(1);

/** One run's RSS figures in KiB. */
interface Sample {
  ready: number;
  churned: number;
  idle: number;
  heapUsed: number;
}

async function runOnce(flags: string): Promise<Sample> {
  const sim = await startSim({ scenario: standardScenario({ type: "m5.4xlarge" }) });
  const root = await tempRoot();
  const port = randomPort();
  try {
    const config = await writeChildConfig(root, sim, port, {
      logLevel: "warning",
      reconcileIntervalSeconds: 0.5,
      releaseDelaySeconds: 6,
      ec2ResyncSeconds: 6,
      leakedEniGraceSeconds: 30,
      pools: [{ name: "default", ipCooldownSeconds: 3 }],
      ...EXTRA_CONFIG,
    });
    const d = spawnDaemon(root, config, port, {
      ...EXTRA_ENV,
      ...(flags ? { DENO_V8_FLAGS: flags } : {}),
    }, WRAPPER);
    const client = ipamClient(`${root}/ipam.sock`);
    try {
      await d.ready(60_000);
      await sleep(2000);
      const ready = d.rssKib();
      const live: string[] = [];
      for (let i = 0; i < PAIRS; i++) {
        const t = performance.now();
        const pod = `p${i}`;
        const r = await client.call({
          op: "add",
          network: "vpcni",
          containerId: pod,
          ifName: "eth0",
          netns: "/proc/self/ns/net",
          podNamespace: "bench",
          podName: pod,
        });
        if (!r.ok) throw new Error(JSON.stringify(r));
        live.push(pod);
        if (live.length > 36) {
          const old = live.shift()!;
          await client.call({ op: "del", network: "vpcni", containerId: old, ifName: "eth0" });
        }
        const wait = 1000 / RATE - (performance.now() - t);
        if (wait > 0) await sleep(wait);
      }
      const churned = d.rssKib();
      await sleep(IDLE_SECONDS * 1000);
      const idle = d.rssKib();
      const m = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const heapUsed = Number(
        /vpcni_daemon_memory_bytes\{kind="heap_used"\} (\d+)/.exec(m)?.[1] ?? 0,
      ) / 1024;
      return { ready, churned, idle, heapUsed };
    } finally {
      client.close();
      await d.stop();
    }
  } finally {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

console.log(
  `${PAIRS} ADD/DEL pairs at ${RATE}/s; MiB; second of two runs per flag set; env ${
    JSON.stringify(EXTRA_ENV)
  }; config ${JSON.stringify(EXTRA_CONFIG)}`,
);
console.log(
  `| V8 flags | RSS at ready | RSS after churn | RSS idle ${IDLE_SECONDS} s later | heap used |`,
);
console.log("|---|---|---|---|---|");
for (const flags of FLAG_SETS) {
  await runOnce(flags);
  const s = await runOnce(flags);
  console.log(
    `| ${flags ? `\`${flags}\`` : "(none)"} | ${mib(s.ready)} | ${mib(s.churned)} | ${
      mib(s.idle)
    } | ${mib(s.heapUsed)} |`,
  );
}
