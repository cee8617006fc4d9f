/**
 * Where the milliseconds of one pod's ADD+DEL go with the thin plugin and the daemon wiring
 * the pod, each part timed on its own in one run (medians of `--n` rounds, interleaved):
 *
 * - the launcher's hop: the thin plugin against a daemon that answers at once, exec'd through
 *   the static launcher program, through the `/bin/sh` launcher script, and as `deno run`
 *   directly (both launchers as `vpcni install` writes them from source);
 * - Deno's own start: `deno run` of an empty file with the launcher's flags;
 * - the thin client beyond that start: the same exchange with a daemon that answers at once
 *   (loading the 13 KB bundle, `Deno.connect`, one HTTP exchange, exit);
 * - the daemon's side of a real ADD and DEL (the daemon's CNI service, ipam/cni_service.ts, on
 *   its own workers behind `Deno.serve`, as in `vpcni serve`), split by marks on the daemon's
 *   thread: request in → the worker's reservation call arrives (the job's hop to the worker,
 *   the plugin's checks, and for DEL the pod's teardown, which comes before the release) →
 *   answered → the worker's result is back → response out;
 * - a job that does nothing on a worker (CNI VERSION through the service): the thread hops
 *   alone.
 *
 * CPU per process is the children's user + system time (/proc/self/stat), the daemon's the
 * timing process's own. Runs inside a netns it creates (`vcnk…`), like bench/cni/cni_bench.ts.
 *
 * Run: `deno run -A bench/cni/breakdown.ts [--n=30]` (root).
 *
 * @module
 */
import { CniService } from "../../ipam/cni_service.ts";
import {
  CNI_PROTOCOL_VERSION,
  type IpamRequest,
  type IpamResponse,
  type PodAllocation,
} from "../../proto/ipam.ts";
import { loadAverage, runInNodeNetns, sh } from "./node_netns.ts";
import { timedExec } from "./timed_exec.ts";

const ENI_MAC = "02:00:00:77:00:02";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
const r1 = (x: number) => Math.round(x * 10) / 10;

function procCpu(): { self: number; children: number } {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return {
    self: (Number(f[11]) + Number(f[12])) * 10,
    children: (Number(f[13]) + Number(f[14])) * 10,
  };
}

/** Execs `argv` as a runtime execs a plugin; returns wall ms, CPU ms and stdout. */
async function exec(argv: string[], env: Record<string, string>, stdin: string) {
  const c0 = procCpu().children;
  const { ms, stdout } = await timedExec(argv, env, stdin, true);
  return { ms, cpu: procCpu().children - c0, stdout };
}

/** The daemon's thread's marks for one request. */
interface Marks {
  in: number;
  ipamIn?: number;
  ipamOut?: number;
  done?: number;
  out?: number;
}

async function inner(n: number): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "vcnk-" });
  const pod = `vcnk${Deno.pid % 10000}p`;
  await sh(["ip", "netns", "add", pod]);
  try {
    const repo = new URL("../../", import.meta.url).pathname;
    const installs = { program: `${dir}/program`, script: `${dir}/script` };
    for (const [form, bin] of Object.entries(installs)) {
      await sh(
        ["deno", "run", "-A", `${repo}main.ts`, "install", "--bin-dir", bin, "--skip-conflist"],
        { ...Deno.env.toObject(), ...(form === "script" ? { CC: `${dir}/no-cc` } : {}) },
      );
    }
    const { LAUNCHER_FLAGS, PLUGIN_BUNDLE_PATH } = await import("../../cli/launcher.ts");
    const denoArgv = [Deno.execPath(), "run", ...LAUNCHER_FLAGS, "--no-config"];

    // A daemon that answers every invocation at once.
    const instantSocket = `${dir}/instant.sock`;
    const instant = Deno.serve({ path: instantSocket, onListen() {} }, async (req) => {
      await req.text();
      return Response.json({
        version: CNI_PROTOCOL_VERSION,
        ok: true,
        exitCode: 0,
        stdout: '{"cniVersion":"1.1.0"}',
      });
    });

    // The daemon's CNI service with a one-address pool, marks on its thread.
    let current: Marks | undefined;
    let held: PodAllocation | undefined;
    const reserve = (req: IpamRequest): IpamResponse => {
      if (req.op === "add") {
        held = {
          network: req.network,
          containerId: req.containerId,
          ifName: req.ifName,
          ip: "10.78.0.2",
          pool: "default",
          eni: {
            id: "eni-0breakdown00000001",
            mac: ENI_MAC,
            deviceIndex: 0,
            primary: true,
            subnetId: "subnet-0breakdown0001",
            subnetCidr: "10.78.0.0/16",
            gateway: "10.78.0.1",
            routeTable: 100,
          },
          vpcCidrs: ["10.78.0.0/16"],
          nodeIps: [],
          nodeEniMacs: [ENI_MAC],
        };
        return { ok: true, allocation: held };
      }
      if (req.op === "del") {
        const released = held ? [held] : [];
        held = undefined;
        return { ok: true, released };
      }
      return { ok: false, code: 4, msg: `${req.op} is not served here` };
    };
    const cni = new CniService((body) => {
      if (current) current.ipamIn = performance.now();
      const a = reserve(JSON.parse(body));
      if (current) current.ipamOut = performance.now();
      return Promise.resolve(a);
    });
    const daemonSocket = `${dir}/daemon.sock`;
    const daemon = Deno.serve({ path: daemonSocket, onListen() {} }, async (request) => {
      const marks: Marks = { in: performance.now() };
      current = marks;
      const req = await request.json();
      const answer = await cni.run(req);
      marks.done = performance.now();
      const res = Response.json(answer);
      marks.out = performance.now();
      return res;
    });

    const env = (cmd: string) => ({
      CNI_COMMAND: cmd,
      CNI_CONTAINERID: "vcnk-0",
      CNI_NETNS: `/run/netns/${pod}`,
      CNI_IFNAME: "eth0",
      CNI_PATH: "/opt/cni/bin",
      PATH: "/usr/bin:/bin",
      // What the launchers set; `deno run` directly needs it too under a bare environment.
      DENO_DIR: Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME") ?? "/root"}/.cache/deno`,
    });
    const conf = (socket: string) =>
      JSON.stringify({
        cniVersion: "1.1.0",
        name: "vcnk",
        type: "vpcni",
        datapath: "veth",
        mtu: 9001,
        daemonSocket: socket,
      });
    const empty = `${dir}/empty.js`;
    await Deno.writeTextFile(empty, "");

    const rows: Record<string, { ms: number[]; cpu: number[] }> = {};
    const add = (k: string, ms: number, cpu: number) => {
      rows[k] ??= { ms: [], cpu: [] };
      rows[k].ms.push(ms);
      rows[k].cpu.push(cpu);
    };
    const phases: Record<string, number[]> = {};
    const phase = (k: string, v: number) => (phases[k] ??= []).push(v);

    for (let i = -2; i < n; i++) {
      const warm = i < 0;
      const e = await exec([...denoArgv, empty], env("ADD"), "");
      if (!warm) add("empty deno run", e.ms, e.cpu);
      for (
        const [name, argv] of [
          ["thin, deno run directly", [...denoArgv, PLUGIN_BUNDLE_PATH]],
          ["thin, launcher program", [`${installs.program}/vpcni`]],
          ["thin, launcher script", [`${installs.script}/vpcni`]],
        ] as const
      ) {
        const r = await exec([...argv], env("ADD"), conf(instantSocket));
        if (!warm) add(`${name} (instant daemon)`, r.ms, r.cpu);
      }
      // A real pair through the program launcher, with the daemon's marks.
      const s0 = procCpu().self;
      const a = await exec([`${installs.program}/vpcni`], env("ADD"), conf(daemonSocket));
      const addMarks = current!;
      const s1 = procCpu().self;
      const delConf = JSON.stringify({
        ...JSON.parse(conf(daemonSocket)),
        prevResult: JSON.parse(a.stdout),
      });
      const d = await exec([`${installs.program}/vpcni`], env("DEL"), delConf);
      const delMarks = current!;
      const s2 = procCpu().self;
      // A job that does nothing: CNI VERSION through the service.
      const v0 = performance.now();
      await cni.run({
        version: CNI_PROTOCOL_VERSION,
        op: "cni",
        env: { CNI_COMMAND: "VERSION" },
        stdin: '{"cniVersion":"1.1.0"}',
      });
      const hop = performance.now() - v0;
      if (warm) continue;
      add("ADD, real daemon", a.ms, a.cpu);
      add("DEL, real daemon", d.ms, d.cpu);
      phase("daemon CPU, ADD", s1 - s0);
      phase("daemon CPU, DEL", s2 - s1);
      phase("worker hop alone (VERSION job)", hop);
      for (const [verb, m] of [["ADD", addMarks], ["DEL", delMarks]] as const) {
        phase(`${verb}: request in → reservation call on the daemon's thread`, m.ipamIn! - m.in);
        phase(`${verb}: reservation answered`, m.ipamOut! - m.ipamIn!);
        phase(`${verb}: answer → worker's result back`, m.done! - m.ipamOut!);
        phase(`${verb}: response out`, m.out! - m.done!);
        phase(`${verb}: daemon total`, m.out! - m.in);
      }
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(rows)) {
      out[k] = { ms: r1(median(v.ms)), cpu: r1(v.cpu.reduce((x, y) => x + y, 0) / v.cpu.length) };
    }
    for (const [k, v] of Object.entries(phases)) {
      out[k] = k.startsWith("daemon CPU")
        ? { cpu: r1(v.reduce((x, y) => x + y, 0) / v.length) }
        : { ms: r1(median(v)) };
    }
    console.log(JSON.stringify(out));
    cni.close();
    await instant.shutdown();
    await daemon.shutdown();
  } finally {
    await sh(["ip", "netns", "del", pod]).catch(() => {});
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Runs the breakdown in a node netns of its own and prints a table. */
async function outer(n: number): Promise<void> {
  const before = await loadAverage();
  const figures = await runInNodeNetns<Record<string, { ms?: number; cpu?: number }>>(
    `vcnk${Deno.pid % 10000}n`,
    ENI_MAC,
    new URL(import.meta.url).pathname,
    [`--n=${n}`],
  );
  console.log(`| part (${n} rounds, load ${before} → ${await loadAverage()}) | wall ms | CPU ms |`);
  console.log("|---|---|---|");
  for (const [k, v] of Object.entries(figures)) {
    console.log(`| ${k} | ${v.ms ?? ""} | ${v.cpu ?? ""} |`);
  }
}

if (import.meta.main) {
  const n = Number(Deno.args.find((a) => a.startsWith("--n="))?.slice(4) ?? 30);
  if (Deno.args.includes("--inner")) await inner(n);
  else await outer(n);
}
