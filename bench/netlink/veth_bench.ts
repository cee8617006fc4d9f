/**
 * Benchmark: create, address and delete N veth pairs through netlink/ and through
 * `ip -batch` (iproute2, the peer) doing the same work, in the same run.
 *
 * Each side works in its own fresh netns. Every phase (create all, address all, delete all)
 * goes chunk by chunk (10 pairs), the two sides taking turns and the first side alternating,
 * so both see the same machine load: on a shared machine the kernel's share of the time
 * (unregistering a device waits for RCU grace periods) swings by tens of percent from one
 * second to the next, and coarse alternation measures that swing instead of the code.
 *
 * netlink/ is timed in-process, as the plugin and the daemon use it: one request per object,
 * by name. iproute2 is one long-running `ip -n <netns> -batch -` process per round; a chunk
 * is timed from writing its lines until ip has printed the `link show dev lo` that closes it
 * (netlink/ closes its chunk with the same GETLINK). Opening the socket and starting ip are
 * not timed. `ratio` is median(vpcni) / median(iproute2); the per-round ratios are reported
 * too, with their range, to show how far the machine's load moved them.
 *
 * Run alone (root): `deno run -A bench/netlink/veth_bench.ts [--pairs=500] [--rounds=5]`.
 *
 * @module
 */

import {
  addAddress,
  createVeth,
  deleteLink,
  getLink,
  listLinks,
  NetlinkSocket,
} from "../../netlink/mod.ts";

/** The phases of one round. */
export const PHASES = ["create", "address", "delete"] as const;
/** Milliseconds per phase of one round. */
export type PhaseTimes = Record<(typeof PHASES)[number], number>;

/** The result of {@linkcode benchNetlink}. */
export interface NetlinkBenchResult {
  /** What was measured. */
  name: string;
  /** veth pairs per round. */
  pairs: number;
  /** Rounds per side. */
  rounds: number;
  /** Median total milliseconds for netlink/. */
  vpcniMs: number;
  /** Median total milliseconds for `ip -batch`. */
  iprouteMs: number;
  /** vpcniMs / iprouteMs (ratio of the medians): at most 1.0 is the target. */
  ratio: number;
  /** Median of the per-round ratios, and their range: how much the machine moved them. */
  perRound: { median: number; min: number; max: number };
  /** Median milliseconds per phase, per side. */
  phases: { vpcni: PhaseTimes; iproute: PhaseTimes };
  /** Every round's phase times, per side. */
  samples: { vpcni: PhaseTimes[]; iproute: PhaseTimes[] };
  /** One markdown table row for bench/RESULTS.md. */
  markdown: string;
  /** The command that reproduces the figure. */
  command: string;
}

const pairName = (i: number, end: "a" | "b") => `vnlb${end}${i}`;
const pairAddress = (i: number) => `10.100.${(i + 1) >> 8}.${(i + 1) & 255}/32`;
const total = (t: PhaseTimes) => t.create + t.address + t.delete;

async function ipNetns(args: string[]): Promise<void> {
  const out = await new Deno.Command("ip", { args: ["netns", ...args], stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`ip netns ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** A chunk of pairs: the unit at which the two sides take turns. */
const CHUNK = 10;

/** One phase's work for pairs [from, to) as iproute2 batch lines. */
function batchLines(phase: (typeof PHASES)[number], from: number, to: number): string {
  const out: string[] = [];
  for (let i = from; i < to; i++) {
    if (phase === "create") {
      out.push(`link add ${pairName(i, "a")} type veth peer name ${pairName(i, "b")}`);
    } else if (phase === "address") {
      out.push(`address add ${pairAddress(i)} dev ${pairName(i, "a")}`);
    } else out.push(`link del ${pairName(i, "a")}`);
  }
  return out.join("\n") + "\n";
}

/** One phase's work for pairs [from, to) through netlink/; returns milliseconds. */
function netlinkChunk(
  s: NetlinkSocket,
  phase: (typeof PHASES)[number],
  from: number,
  to: number,
): number {
  const t0 = performance.now();
  for (let i = from; i < to; i++) {
    if (phase === "create") createVeth(s, { name: pairName(i, "a"), peerName: pairName(i, "b") });
    else if (phase === "address") addAddress(s, pairName(i, "a"), pairAddress(i));
    else deleteLink(s, pairName(i, "a"));
  }
  // The same closing request the iproute2 side uses to know its chunk is done.
  getLink(s, "lo");
  return performance.now() - t0;
}

/**
 * A long-running `ip -n <netns> -batch -`. Each chunk ends with `link show dev lo`, whose
 * output (ip flushes after every batch command) says the chunk is done.
 */
class IpBatch {
  private child: Deno.ChildProcess;
  private stdin: WritableStreamDefaultWriter<Uint8Array>;
  private stdout: ReadableStreamDefaultReader<Uint8Array>;
  private seen = "";
  private decoder = new TextDecoder();
  private encoder = new TextEncoder();

  constructor(netns: string) {
    this.child = new Deno.Command("ip", {
      args: ["-n", netns, "-batch", "-"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.stdin = this.child.stdin.getWriter();
    this.stdout = this.child.stdout.getReader();
  }

  /** Runs the lines; returns milliseconds until ip has done them all. */
  async chunk(lines: string): Promise<number> {
    const t0 = performance.now();
    await this.stdin.write(this.encoder.encode(lines + "link show dev lo\n"));
    while (!/^1: lo:/m.test(this.seen)) {
      const { value, done } = await this.stdout.read();
      if (done) throw new Error(`ip -batch stopped: ${await this.stderrText()}`);
      this.seen += this.decoder.decode(value, { stream: true });
    }
    const ms = performance.now() - t0;
    this.seen = "";
    return ms;
  }

  private async stderrText(): Promise<string> {
    return new TextDecoder().decode((await this.child.output()).stderr);
  }

  /** Ends the batch; throws if ip reported any failure. */
  async close(): Promise<void> {
    await this.stdin.close();
    this.stdout.releaseLock();
    await this.child.stdout.cancel();
    const out = await this.child.output();
    if (!out.success) throw new Error(`ip -batch failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/**
 * One round: each phase walks the pairs chunk by chunk, the two sides taking turns (the
 * first side alternates per chunk), so both see the same machine load.
 */
async function runRound(
  nsV: string,
  nsI: string,
  pairs: number,
  round: number,
): Promise<{ vpcni: PhaseTimes; iproute: PhaseTimes }> {
  const vpcni: PhaseTimes = { create: 0, address: 0, delete: 0 };
  const iproute: PhaseTimes = { create: 0, address: 0, delete: 0 };
  using s = NetlinkSocket.openIn(`/run/netns/${nsV}`);
  const ip = new IpBatch(nsI);
  try {
    let turn = round;
    for (const phase of PHASES) {
      for (let from = 0; from < pairs; from += CHUNK) {
        const to = Math.min(pairs, from + CHUNK);
        if (turn++ % 2 === 0) {
          vpcni[phase] += netlinkChunk(s, phase, from, to);
          iproute[phase] += await ip.chunk(batchLines(phase, from, to));
        } else {
          iproute[phase] += await ip.chunk(batchLines(phase, from, to));
          vpcni[phase] += netlinkChunk(s, phase, from, to);
        }
      }
    }
  } finally {
    await ip.close();
  }
  return { vpcni, iproute };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function medianPhases(xs: PhaseTimes[]): PhaseTimes {
  return {
    create: median(xs.map((x) => x.create)),
    address: median(xs.map((x) => x.address)),
    delete: median(xs.map((x) => x.delete)),
  };
}

/** Checks a round left the netns as it found it (only lo), so both sides did all the work. */
function assertEmpty(netnsPath: string): void {
  using s = NetlinkSocket.openIn(netnsPath);
  const left = listLinks(s).filter((l) => l.name !== "lo");
  if (left.length > 0) throw new Error(`a round left ${left.length} links behind`);
}

/** Runs the benchmark (root). */
export async function benchNetlink(
  opts: { pairs?: number; rounds?: number } = {},
): Promise<NetlinkBenchResult> {
  const pairs = opts.pairs ?? 500;
  const rounds = opts.rounds ?? 5;
  const samples = { vpcni: [] as PhaseTimes[], iproute: [] as PhaseTimes[] };
  const [nsV, nsI] = [`vnlbv${Deno.pid}`, `vnlbi${Deno.pid}`];
  for (let r = 0; r < rounds; r++) {
    await ipNetns(["add", nsV]);
    await ipNetns(["add", nsI]);
    try {
      const t = await runRound(nsV, nsI, pairs, r);
      assertEmpty(`/run/netns/${nsV}`);
      assertEmpty(`/run/netns/${nsI}`);
      samples.vpcni.push(t.vpcni);
      samples.iproute.push(t.iproute);
    } finally {
      await ipNetns(["del", nsV]);
      await ipNetns(["del", nsI]);
    }
  }
  const vpcniMs = median(samples.vpcni.map(total));
  const iprouteMs = median(samples.iproute.map(total));
  const ratio = vpcniMs / iprouteMs;
  const roundRatios = samples.vpcni.map((v, i) => total(v) / total(samples.iproute[i]));
  const perRound = {
    median: median(roundRatios),
    min: Math.min(...roundRatios),
    max: Math.max(...roundRatios),
  };
  const command = `deno run -A bench/netlink/veth_bench.ts --pairs=${pairs} --rounds=${rounds}`;
  const name = `netlink/: create+address+delete ${pairs} veth pairs`;
  return {
    name,
    pairs,
    rounds,
    vpcniMs,
    iprouteMs,
    ratio,
    perRound,
    phases: { vpcni: medianPhases(samples.vpcni), iproute: medianPhases(samples.iproute) },
    samples,
    command,
    markdown: `| ${name} | vpcni ${vpcniMs.toFixed(0)} ms | iproute2 \`ip -batch\` ${
      iprouteMs.toFixed(0)
    } ms | ${ratio.toFixed(2)}× | \`${command}\` |`,
  };
}

if (import.meta.main) {
  const arg = (k: string) => Deno.args.find((a) => a.startsWith(`--${k}=`))?.split("=")[1];
  const r = await benchNetlink({
    pairs: arg("pairs") ? Number(arg("pairs")) : undefined,
    rounds: arg("rounds") ? Number(arg("rounds")) : undefined,
  });
  const fmt = (t: PhaseTimes) => PHASES.map((p) => `${p} ${t[p].toFixed(0)}`).join(", ");
  console.log(`medians (ms) vpcni:   ${fmt(r.phases.vpcni)}; total ${r.vpcniMs.toFixed(0)}`);
  console.log(`medians (ms) iproute: ${fmt(r.phases.iproute)}; total ${r.iprouteMs.toFixed(0)}`);
  console.log(
    `per-round totals (ms): vpcni ${r.samples.vpcni.map((t) => total(t).toFixed(0))}; ` +
      `ip ${r.samples.iproute.map((t) => total(t).toFixed(0))}`,
  );
  console.log(`ratio ${r.ratio.toFixed(2)}× (median vpcni / median ip; target ≤ 1.0)`);
  console.log(
    `per-round ratios: median ${r.perRound.median.toFixed(2)}×, ` +
      `range ${r.perRound.min.toFixed(2)}–${r.perRound.max.toFixed(2)}×`,
  );
  console.log(r.markdown);
}
