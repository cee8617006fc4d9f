/**
 * `vpcni demo`: a whole node on the embedded simulator. It starts the simulator and its
 * fabric, runs the daemon inside a node netns, adds pods in two pools through the real CNI
 * path, shows where each address came from, checks connectivity, and cleans up on exit or
 * Ctrl-C.
 *
 * @module
 */
import type { Command } from "commander";
import { embeddedLimits } from "../aws/limits.ts";
import { instanceTypeHint } from "../doctor/limits.ts";
import { DemoNode, type DemoPod, kernelHasIpvlan } from "./demo_node.ts";

/** Flags of `vpcni demo`. */
export interface DemoFlags {
  pods: string;
  datapath: string;
  instanceType: string;
  keep?: boolean;
  json?: boolean;
}

/** One connectivity probe and its outcome. */
export interface DemoProbe {
  what: string;
  from: string;
  to: string;
  ok: boolean;
}

/** What `vpcni demo --json` prints. */
export interface DemoReport {
  datapath: string;
  datapathReason: string;
  pods: DemoPod[];
  probes: DemoProbe[];
  cleanedUp: boolean;
  ok: boolean;
}

const DATAPATH_CHOICES = ["auto", "veth", "ipvlan-l2", "ipvlan-l3s"];

class DemoError extends Error {}

function parseFlags(f: DemoFlags): { pods: number; datapath: string } {
  const pods = Number(f.pods);
  if (!Number.isInteger(pods) || pods < 2 || pods > 40) {
    throw new DemoError(`--pods ${f.pods}: give a whole number from 2 to 40`);
  }
  if (!DATAPATH_CHOICES.includes(f.datapath)) {
    throw new DemoError(`--datapath ${f.datapath}: choose one of ${DATAPATH_CHOICES.join(", ")}`);
  }
  if (!embeddedLimits(f.instanceType)) {
    throw new DemoError(
      `--instance-type ${f.instanceType}: not a known instance type; ${
        instanceTypeHint(f.instanceType)
      }`,
    );
  }
  return { pods, datapath: f.datapath };
}

/** Runs the demo; progress goes to stderr with --json, to stdout otherwise. */
export async function runDemo(f: DemoFlags): Promise<DemoReport> {
  const { pods: podCount, datapath: wanted } = parseFlags(f);
  if (Deno.uid() !== 0) {
    throw new DemoError(
      "the demo creates network namespaces: run it as root (a root shell, or sudo)",
    );
  }
  const say = f.json ? (s: string) => console.error(s) : (s: string) => console.log(s);
  const step = (n: number, s: string) => say(`[${n}/6] ${s}`);

  let datapath = wanted;
  let datapathReason = "chosen with --datapath";
  if (wanted === "auto") {
    const ipvlan = kernelHasIpvlan(`${Deno.pid}`);
    datapath = ipvlan ? "ipvlan-l2" : "veth";
    datapathReason = ipvlan
      ? "this kernel has ipvlan"
      : "no ipvlan in this kernel (the kernel lane tests ipvlan)";
  }
  say("vpcni demo: one node on the embedded simulator");
  say(`      datapath ${datapath}: ${datapathReason}`);

  step(1, "starting the EC2 + IMDS simulator, the VPC fabric and the node netns");
  const node = await DemoNode.start({ datapath, instanceType: f.instanceType });
  const report: DemoReport = {
    datapath,
    datapathReason,
    pods: [],
    probes: [],
    cleanedUp: false,
    ok: false,
  };
  let interrupted = false;
  const onSigint = () => {
    interrupted = true;
    say("interrupted: cleaning up");
  };
  Deno.addSignalListener("SIGINT", onSigint);
  try {
    say(`      EC2 ${node.sim.ec2Endpoint}, node ${node.nodeNetns} (${node.nodeIp})`);
    step(2, "installing the plugin and starting the IPAM daemon inside the node");
    await node.startDaemon();
    const t0 = performance.now();
    if (!(await node.waitReady(90_000))) {
      const log = await Deno.readTextFile(node.daemonLog).catch(() => "");
      throw new DemoError(`the daemon did not become ready; its log:\n${log.slice(-3000)}`);
    }
    say(`      daemon ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    step(3, `adding ${podCount} pods through the CNI plugin (pools: internal, public)`);
    const names = Array.from({ length: podCount }, (_, i) => `pod-${i + 1}`);
    const settled = await Promise.allSettled(
      names.map((n, i) => node.addPod(n, i % 2 === 1 ? "public" : undefined)),
    );
    for (const s of settled) {
      if (s.status === "fulfilled") report.pods.push(s.value);
      else say(`      ${(s.reason as Error).message}`);
    }
    report.pods.sort((a, b) => a.name.localeCompare(b.name, "en", { numeric: true }));
    say(podTable(report.pods));
    if (interrupted) return report;

    step(4, "checking connectivity");
    report.probes = await probeAll(node, report.pods);
    for (const p of report.probes) {
      say(`      ${p.ok ? "ok  " : "FAIL"} ${p.what}: ${p.from} -> ${p.to}`);
    }

    if (f.keep && !interrupted) {
      say(`      --keep: inspect with 'ip netns exec ${node.nodeNetns} …'; Ctrl-C to clean up`);
      await new Promise<void>((res) => {
        const t = setInterval(() => {
          if (interrupted) (clearInterval(t), res());
        }, 200);
      });
    }

    step(5, "deleting the pods through the CNI plugin");
    let deleted = 0;
    for (const p of report.pods) if (await node.deletePod(p)) deleted++;
    say(`      ${deleted}/${report.pods.length} pods deleted`);
    report.ok = report.pods.length === podCount && report.probes.every((p) => p.ok) &&
      deleted === report.pods.length;
  } finally {
    step(6, "stopping the daemon and removing the simulator, fabric and namespaces");
    await node.close();
    report.cleanedUp = true;
    Deno.removeSignalListener("SIGINT", onSigint);
  }
  say(report.ok ? "demo: all pods got VPC addresses and could talk" : "demo: FAILED (see above)");
  return report;
}

async function probeAll(node: DemoNode, pods: DemoPod[]): Promise<DemoProbe[]> {
  const probes: DemoProbe[] = [];
  const add = async (what: string, fromNs: string, from: string, to: string) =>
    probes.push({ what, from, to, ok: await node.ping(fromNs, to) });
  const internal = pods.filter((p) => p.pool === "internal");
  const publicPods = pods.filter((p) => p.pool === "public");
  if (internal.length >= 2) {
    await add("pod -> pod, same pool", internal[0].netns, internal[0].name, internal[1].ip);
  }
  if (internal.length && publicPods.length) {
    await add("pod -> pod, other pool", internal[0].netns, internal[0].name, publicPods[0].ip);
  }
  for (const p of [internal[0], publicPods[0]].filter(Boolean)) {
    await add("pod -> node", p.netns, p.name, node.nodeIp);
    await add("node -> pod (kubelet probe)", node.nodePath, "node", p.ip);
  }
  return probes;
}

function podTable(pods: DemoPod[]): string {
  const rows = [["POD", "POOL", "IP", "ENI", "#", "SUBNET", "ZONE"]];
  for (const p of pods) {
    rows.push([p.name, p.pool, p.ip, p.eniId, String(p.deviceIndex), p.subnetCidr, p.zone]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd())
    .join("\n");
}

/** Adds the `demo` verb to the program. */
export function registerDemo(program: Command): void {
  program.command("demo")
    .description(
      "run a whole node on the embedded simulator: daemon, pods in two pools through the " +
        "real CNI path, a connectivity check, then clean up (needs root)",
    )
    .option("--pods <n>", "how many pods to add (2-40)", "6")
    .option("--datapath <kind>", `${DATAPATH_CHOICES.join(" | ")}`, "auto")
    .option("--instance-type <type>", "instance type of the simulated node", "m5.large")
    .option("--keep", "keep everything until Ctrl-C, for inspection")
    .option("--json", "print the report as JSON on stdout (progress goes to stderr)")
    .action(async (f: DemoFlags) => {
      let report: DemoReport;
      try {
        report = await runDemo(f);
      } catch (e) {
        if (e instanceof DemoError) {
          console.error(`vpcni demo: ${e.message}`);
          Deno.exitCode = 2;
          return;
        }
        throw e;
      }
      if (f.json) console.log(JSON.stringify(report, null, 2));
      if (!report.ok) Deno.exitCode = 1;
    });
}
