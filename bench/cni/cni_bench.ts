/**
 * Benchmark: the CNI plugin against the reference `ptp` + `host-local` plugins, side by side
 * in one run, each exec'd the way a container runtime execs it (environment + stdin, wall
 * time from spawn to exit):
 *
 * - single pod: ADD then DEL of one pod, median of `--pairs` pairs (alternating sides); DEL
 *   carries the ADD's result as `prevResult`, as libcni sends it;
 * - 50 concurrent ADDs: wall time until all 50 have answered, median of `--rounds` rounds
 *   (the pods are DELeted between rounds, untimed);
 * - peak RSS of one ADD per side (`/usr/bin/time -f %M`);
 * - vpcni's time per verb beyond an empty `deno run` start.
 *
 * vpcni is measured as `vpcni install` installs it from source: its launcher, which runs
 * the plugin bundled into one file (`deno bundle`) for the CNI verbs; and, for comparison,
 * from the checkout's modules (`exec deno run --allow-all --no-check main.ts`, as the tests
 * run it). With the daemon, the plugin is a thin client (cni/thin.ts): the stand-in daemon
 * of tests/helpers/ipam_standin.ts, in this process, reserves (no EC2 work) and runs the
 * invocation on the daemon's own CNI service (ipam/cni_service.ts). With `ipam: host-local`
 * (same IPAM work as the peer) the whole plugin runs in the process. All use the veth
 * datapath.
 *
 * "Before": `VPCNI_BENCH_BEFORE=<a vpcni as another release installed it>` adds that plugin
 * with the daemon protocol, against the same stand-in (e.g. the previous release's
 * `vpcni install --bin-dir`), so both are measured in one run on the same machine state.
 *
 * CPU per pod counts the daemon's too: the stand-in runs in the timing process, whose own
 * CPU (all threads, the CNI workers included) is added to its children's. The timing
 * process's bookkeeping (spawning, piping) is thereby counted for every side alike.
 *
 * Everything runs in a netns the bench creates (`vcnb…`): the timing loop re-executes this
 * file inside that "node" netns so no `ip netns exec` sits in the measured path.
 *
 * Run alone: `deno run -A bench/cni/cni_bench.ts [--pairs=21] [--rounds=3] [--json]` (root).
 *
 * @module
 */
import { makeCniBinDir } from "../../tests/helpers/cni_launcher.ts";
import { startIpamStandin } from "../../tests/helpers/ipam_standin.ts";
import { loadAverage, runInNodeNetns, sh } from "./node_netns.ts";
import { timedExec, type TimedRun } from "./timed_exec.ts";

/** Figures for one side of a comparison. */
export interface SideFigures {
  /** Median ADD then DEL of one pod, ms. */
  pairMs: number;
  /** Median ADD, ms. */
  addMs: number;
  /** Median DEL, ms. */
  delMs: number;
  /** Median wall time of 50 concurrent ADDs, ms. */
  concurrent50Ms: number;
  /** Median CPU time (user + system) of the 50 concurrent ADD processes, ms: robust to load. */
  concurrent50CpuMs: number;
  /** Peak RSS of one ADD process, KiB. */
  peakRssKiB: number;
  /**
   * Mean CPU time (user + system) of one ADD + DEL pair, ms: the plugin processes and the
   * timing process, where the daemon runs (robust to a busy machine).
   */
  cpuPairMs: number;
}

/** The result of {@linkcode benchCni}. */
export interface CniBenchResult {
  pairs: number;
  rounds: number;
  /** Median wall time of `deno run` of an empty script, ms. */
  emptyDenoMs: number;
  /** Mean CPU time of `deno run` of an empty script, ms. */
  emptyDenoCpuMs: number;
  ptp: SideFigures;
  vpcniHostLocal: SideFigures;
  vpcniDaemon: SideFigures;
  /** vpcni + host-local, as `vpcni install` installs it (the bundled plugin). */
  vpcniBundleHostLocal: SideFigures;
  /** vpcni + the daemon protocol, as `vpcni install` installs it (the bundled plugin). */
  vpcniBundleDaemon: SideFigures;
  /** `VPCNI_BENCH_BEFORE`'s plugin with the daemon protocol, when given. */
  beforeDaemon?: SideFigures;
  /** vpcni / ptp ratios (target: single ≤ 1.5, concurrent ≤ 2.0). */
  ratios: {
    hostLocal: { single: number; concurrent50: number; rss: number; cpu: number };
    daemon: { single: number; concurrent50: number; rss: number; cpu: number };
    bundleHostLocal: { single: number; concurrent50: number; rss: number; cpu: number };
    bundleDaemon: { single: number; concurrent50: number; rss: number; cpu: number };
    beforeDaemon?: { single: number; concurrent50: number; rss: number; cpu: number };
  };
  /** vpcni time per verb beyond an empty Deno start, ms. */
  beyondEmptyStart: {
    hostLocal: { add: number; del: number };
    daemon: { add: number; del: number };
  };
  /** 1-minute load average before and after the run: the machine is shared. */
  loadAverage: string;
  /** Markdown rows for bench/RESULTS.md. */
  markdown: string;
  /** The command that reproduces the figures. */
  command: string;
}

const CONCURRENT = 50;
const STANDIN_ENI_MAC = "02:00:00:77:00:01";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const round1 = (x: number) => Math.round(x * 10) / 10;

/**
 * CPU time of this process's reaped children (cutime + cstime from /proc/self/stat), ms.
 * Read around one child at a time, the difference is that child's CPU.
 */
function childCpuMs(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields[0] is the state (field 3 of proc(5)); cutime and cstime are fields 16 and 17.
  return (Number(fields[13]) + Number(fields[14])) * 10;
}
const round2 = (x: number) => Math.round(x * 100) / 100;

/** CPU time of this process, every thread (utime + stime from /proc/self/stat), ms. */
function selfCpuMs(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** CPU of the children reaped and of this process (the daemon's work), ms. */
function cpuMs(): number {
  return childCpuMs() + selfCpuMs();
}

/** One plugin invocation as a runtime makes it; returns wall ms. */
function execPlugin(
  path: string,
  env: Record<string, string>,
  stdin: string,
  wrap: string[] = [],
): Promise<TimedRun> {
  return timedExec([...wrap, path], env, stdin);
}

type SideName =
  | "ptp"
  | "vpcniHostLocal"
  | "vpcniDaemon"
  | "vpcniBundleHostLocal"
  | "vpcniBundleDaemon"
  | "beforeDaemon";

interface Side {
  name: SideName;
  plugin: string;
  config: (dir: string) => string;
}

/** DEL's stdin as a runtime sends it: the config plus the ADD's result as `prevResult`. */
function withPrevResult(config: string, addStdout: string): string {
  return JSON.stringify({ ...JSON.parse(config), prevResult: JSON.parse(addStdout) });
}

/** ADD then DEL of pod `i`, DEL carrying prevResult; returns both wall times. */
async function addDel(
  s: Side,
  dir: string,
  env: (cmd: string, i: number) => Record<string, string>,
  i: number,
  wrap: string[] = [],
): Promise<{ add: number; del: number; addStderr: string }> {
  const add = await execPlugin(s.plugin, env("ADD", i), s.config(dir), wrap);
  const del = await execPlugin(s.plugin, env("DEL", i), withPrevResult(s.config(dir), add.stdout));
  return { add: add.ms, del: del.ms, addStderr: add.stderr };
}

/** Runs inside the node netns: every timing. Prints the figures as JSON. */
async function inner(pairs: number, rounds: number): Promise<void> {
  const bin = await makeCniBinDir();
  const dir = await Deno.makeTempDir({ prefix: "vcnb-" });
  const socket = `${dir}/ipam.sock`;
  const addresses = Array.from({ length: 200 }, (_, i) => `10.77.${1 + (i >> 8)}.${(i & 255) + 2}`);
  const standin = startIpamStandin({
    socket,
    addresses,
    subnetCidr: "10.77.0.0/16",
    gateway: "10.77.0.1",
  });
  const podPrefix = `vcnb${Deno.pid % 10000}p`;
  const pods: string[] = [];
  try {
    for (let i = 0; i < CONCURRENT; i++) {
      pods.push(`${podPrefix}${i}`);
      await sh(["ip", "netns", "add", `${podPrefix}${i}`]);
    }
    // What `vpcni install` installs from source: the launcher and the bundled plugin.
    const installed = `${dir}/installed`;
    await sh([
      "deno",
      "run",
      "-A",
      new URL("../../main.ts", import.meta.url).pathname,
      "install",
      "--bin-dir",
      installed,
      "--skip-conflist",
    ]);
    const bundled = `${installed}/vpcni`;
    const hostLocal = (subnet: string) => ({
      type: "host-local",
      ranges: [[{ subnet }]],
      dataDir: `${dir}/hl`,
    });
    const sides: Side[] = [
      {
        name: "ptp",
        plugin: `${bin.dir}/ptp`,
        config: () =>
          JSON.stringify({
            cniVersion: "1.1.0",
            name: "vcnb-ptp",
            type: "ptp",
            ipMasq: false,
            mtu: 9001,
            ipam: hostLocal("10.91.0.0/24"),
          }),
      },
      {
        name: "vpcniHostLocal",
        plugin: bin.vpcni,
        config: () =>
          JSON.stringify({
            cniVersion: "1.1.0",
            name: "vcnb-hl",
            type: "vpcni",
            datapath: "veth",
            mtu: 9001,
            ipam: hostLocal("10.92.0.0/24"),
          }),
      },
      {
        name: "vpcniDaemon",
        plugin: bin.vpcni,
        config: () =>
          JSON.stringify({
            cniVersion: "1.1.0",
            name: "vcnb-d",
            type: "vpcni",
            datapath: "veth",
            mtu: 9001,
            daemonSocket: socket,
          }),
      },
      {
        name: "vpcniBundleHostLocal",
        plugin: bundled,
        config: () =>
          JSON.stringify({
            cniVersion: "1.1.0",
            name: "vcnb-bhl",
            type: "vpcni",
            datapath: "veth",
            mtu: 9001,
            ipam: hostLocal("10.93.0.0/24"),
          }),
      },
      {
        name: "vpcniBundleDaemon",
        plugin: bundled,
        config: () =>
          JSON.stringify({
            cniVersion: "1.1.0",
            name: "vcnb-bd",
            type: "vpcni",
            datapath: "veth",
            mtu: 9001,
            daemonSocket: socket,
          }),
      },
    ];
    const before = Deno.env.get("VPCNI_BENCH_BEFORE");
    if (before) {
      sides.push({
        name: "beforeDaemon",
        plugin: before,
        config: () =>
          JSON.stringify({
            cniVersion: "1.1.0",
            name: "vcnb-before",
            type: "vpcni",
            datapath: "veth",
            mtu: 9001,
            daemonSocket: socket,
          }),
      });
    }
    const env = (cmd: string, i: number) => ({
      CNI_COMMAND: cmd,
      CNI_CONTAINERID: `vcnb-${i}`,
      CNI_NETNS: `/run/netns/${pods[i]}`,
      CNI_IFNAME: "eth0",
      CNI_PATH: bin.dir,
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    });

    // Warm-up: one pair per side (fills Deno's module cache, page cache, the plugin's code
    // cache) and the daemon's first CNI worker.
    for (const s of sides) {
      for (let k = 0; k < 2; k++) await addDel(s, dir, env, 0);
    }

    const empty = `${dir}/empty.ts`;
    await Deno.writeTextFile(empty, "");
    const emptyMs: number[] = [];
    const samples: Record<
      string,
      { add: number[]; del: number[]; conc: number[]; concCpu: number[]; cpu: number }
    > = {};
    for (const s of sides) samples[s.name] = { add: [], del: [], conc: [], concCpu: [], cpu: 0 };
    let emptyCpu = 0;
    for (let p = 0; p < pairs; p++) {
      const c0 = cpuMs();
      const t0 = performance.now();
      await new Deno.Command("deno", {
        args: ["run", "--no-check", empty],
        stdout: "null",
        stderr: "null",
      }).output();
      emptyMs.push(performance.now() - t0);
      emptyCpu += cpuMs() - c0;
      for (const s of sides) {
        const c0 = cpuMs();
        const r = await addDel(s, dir, env, 0);
        samples[s.name].add.push(r.add);
        samples[s.name].del.push(r.del);
        samples[s.name].cpu += cpuMs() - c0;
      }
    }
    for (let r = 0; r < rounds; r++) {
      for (const s of sides) {
        const c0 = cpuMs();
        const t0 = performance.now();
        const added = await Promise.all(
          pods.map((_, i) => execPlugin(s.plugin, env("ADD", i), s.config(dir))),
        );
        samples[s.name].conc.push(performance.now() - t0);
        samples[s.name].concCpu.push(cpuMs() - c0);
        await Promise.all(
          pods.map((_, i) =>
            execPlugin(s.plugin, env("DEL", i), withPrevResult(s.config(dir), added[i].stdout))
          ),
        );
      }
    }
    const rss: Record<string, number> = {};
    for (const s of sides) {
      const r = await addDel(s, dir, env, 1, ["/usr/bin/time", "-f", "vcnb-rss %M"]);
      rss[s.name] = Number(/vcnb-rss (\d+)/.exec(r.addStderr)?.[1] ?? NaN);
    }
    const figures: Record<string, SideFigures> = {};
    for (const s of sides) {
      const x = samples[s.name];
      figures[s.name] = {
        pairMs: round1(median(x.add.map((a, i) => a + x.del[i]))),
        cpuPairMs: round1(x.cpu / pairs),
        addMs: round1(median(x.add)),
        delMs: round1(median(x.del)),
        concurrent50Ms: round1(median(x.conc)),
        concurrent50CpuMs: round1(median(x.concCpu)),
        peakRssKiB: rss[s.name],
      };
    }
    console.log(JSON.stringify({
      emptyDenoMs: round1(median(emptyMs)),
      emptyDenoCpuMs: round1(emptyCpu / pairs),
      figures,
    }));
  } finally {
    await standin.close();
    for (const p of pods) await sh(["ip", "netns", "del", p]).catch(() => {});
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await bin.remove();
  }
}

/** Runs the whole benchmark (root): creates the node netns and times inside it. */
export async function benchCni(
  opts: { pairs?: number; rounds?: number } = {},
): Promise<CniBenchResult> {
  const pairs = Math.max(20, opts.pairs ?? 21);
  const rounds = Math.max(1, opts.rounds ?? 3);
  const loadBefore = await loadAverage();
  // The stand-in daemon reports its addresses on a primary ENI with this MAC.
  const { emptyDenoMs, emptyDenoCpuMs, figures } = await runInNodeNetns<{
    emptyDenoMs: number;
    emptyDenoCpuMs: number;
    figures: Record<SideName, SideFigures>;
  }>(`vcnb${Deno.pid % 10000}n`, STANDIN_ENI_MAC, new URL(import.meta.url).pathname, [
    `--pairs=${pairs}`,
    `--rounds=${rounds}`,
  ]);
  const ratio = (v: SideFigures) => ({
    single: round2(v.pairMs / figures.ptp.pairMs),
    concurrent50: round2(v.concurrent50Ms / figures.ptp.concurrent50Ms),
    rss: round2(v.peakRssKiB / figures.ptp.peakRssKiB),
    cpu: round2(v.cpuPairMs / figures.ptp.cpuPairMs),
  });
  const beyond = (v: SideFigures) => ({
    add: round1(v.addMs - emptyDenoMs),
    del: round1(v.delMs - emptyDenoMs),
  });
  const command = `deno run -A bench/cni/cni_bench.ts --pairs=${pairs} --rounds=${rounds}`;
  const row = (label: string, v: SideFigures, r?: ReturnType<typeof ratio>) =>
    `| ${label} | ${v.pairMs} | ${v.addMs} / ${v.delMs} | ${v.concurrent50Ms} | ${v.concurrent50CpuMs} ms | ${
      Math.round(v.peakRssKiB / 1024)
    } MiB | ${v.cpuPairMs} ms | ` +
    (r ? `${r.single} | ${r.concurrent50} | ${r.cpu} |` : "1 | 1 | 1 |");
  const markdown = [
    "| CNI plugin (veth datapath) | ADD+DEL ms (median) | ADD / DEL ms | 50 concurrent ADDs ms | CPU of 50 ADDs | peak RSS | CPU per ADD+DEL | single ratio | 50-ADD ratio | CPU ratio |",
    "|---|---|---|---|---|---|---|---|---|---|",
    row("reference ptp + host-local", figures.ptp),
    row(
      "vpcni from main.ts's modules + host-local",
      figures.vpcniHostLocal,
      ratio(figures.vpcniHostLocal),
    ),
    row(
      "vpcni from main.ts's modules + IPAM daemon protocol (stand-in daemon)",
      figures.vpcniDaemon,
      ratio(figures.vpcniDaemon),
    ),
    row(
      "vpcni as installed (bundled plugin) + host-local",
      figures.vpcniBundleHostLocal,
      ratio(figures.vpcniBundleHostLocal),
    ),
    row(
      "vpcni as installed (bundled plugin) + IPAM daemon protocol (stand-in daemon)",
      figures.vpcniBundleDaemon,
      ratio(figures.vpcniBundleDaemon),
    ),
    ...(figures.beforeDaemon
      ? [row(
        "before: VPCNI_BENCH_BEFORE's plugin + IPAM daemon protocol (stand-in daemon)",
        figures.beforeDaemon,
        ratio(figures.beforeDaemon),
      )]
      : []),
    `| empty \`deno run\` | ${emptyDenoMs} per start | | | | | ${emptyDenoCpuMs} ms per start | | | |`,
  ].join("\n");
  return {
    loadAverage: `${loadBefore} → ${await loadAverage()}`,
    pairs,
    rounds,
    emptyDenoMs,
    emptyDenoCpuMs,
    ptp: figures.ptp,
    vpcniHostLocal: figures.vpcniHostLocal,
    vpcniDaemon: figures.vpcniDaemon,
    vpcniBundleHostLocal: figures.vpcniBundleHostLocal,
    vpcniBundleDaemon: figures.vpcniBundleDaemon,
    beforeDaemon: figures.beforeDaemon,
    ratios: {
      hostLocal: ratio(figures.vpcniHostLocal),
      daemon: ratio(figures.vpcniDaemon),
      bundleHostLocal: ratio(figures.vpcniBundleHostLocal),
      bundleDaemon: ratio(figures.vpcniBundleDaemon),
      beforeDaemon: figures.beforeDaemon ? ratio(figures.beforeDaemon) : undefined,
    },
    beyondEmptyStart: {
      hostLocal: beyond(figures.vpcniHostLocal),
      daemon: beyond(figures.vpcniDaemon),
    },
    markdown,
    command,
  };
}

if (import.meta.main) {
  const flag = (name: string) => Deno.args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
  const pairs = Number(flag("pairs") ?? 21);
  const rounds = Number(flag("rounds") ?? 3);
  if (Deno.args.includes("--inner")) {
    await inner(pairs, rounds);
  } else {
    const r = await benchCni({ pairs, rounds });
    if (Deno.args.includes("--json")) console.log(JSON.stringify(r, null, 2));
    else {
      console.log(r.markdown);
      console.log(
        `\nratios vs ptp+host-local — host-local delegation: single ${r.ratios.hostLocal.single}, ` +
          `50 concurrent ${r.ratios.hostLocal.concurrent50}; daemon: single ${r.ratios.daemon.single}, ` +
          `50 concurrent ${r.ratios.daemon.concurrent50}; bundle + host-local: single ` +
          `${r.ratios.bundleHostLocal.single}, 50 concurrent ${r.ratios.bundleHostLocal.concurrent50}; ` +
          `bundle + daemon: single ${r.ratios.bundleDaemon.single}, 50 concurrent ` +
          `${r.ratios.bundleDaemon.concurrent50} ` +
          `(targets ≤ 1.5, ≤ 2.0; load average ${r.loadAverage})`,
      );
      console.log(
        `vpcni beyond an empty Deno start (${r.emptyDenoMs} ms): host-local ADD +${r.beyondEmptyStart.hostLocal.add} ms, ` +
          `DEL +${r.beyondEmptyStart.hostLocal.del} ms; daemon ADD +${r.beyondEmptyStart.daemon.add} ms, DEL +${r.beyondEmptyStart.daemon.del} ms`,
      );
    }
  }
}
