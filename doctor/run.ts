/**
 * Runs every check of `vpcni doctor` in an order that reads top to bottom like the path an
 * ADD takes: daemon, IMDS, EC2, limits, pools, subnets, datapath, agreement, leaks, CNI
 * config, throttling.
 *
 * @module
 */
import { parse as parseYaml } from "yaml";
import type { Subnet } from "../aws/ec2.ts";
import { processArgvs } from "../base/processes.ts";
import {
  attachedEnis,
  clockOffsetSeconds,
  detachedEnis,
  doctorEc2Client,
  ec2Target,
  type LeakedEni,
  nodeSubnets,
  type PermissionProbe,
  probePermissions,
} from "./cloud.ts";
import {
  checkConsistency,
  checkDatapath,
  checkLeakedEnis,
  checkPools,
  checkSubnets,
} from "./checks.ts";
import {
  checkDaemon,
  checkImds,
  checkLimits,
  checkPermissions,
  checkThrottling,
} from "./checks_service.ts";
import { checkDevicePlugin, fetchDevicePluginView } from "./checks_device_plugin.ts";
import { checkCniConfig } from "./cniconf.ts";
import { analyseDatapath, type DatapathFindings, type DatapathSettings } from "./datapath.ts";
import { type DoctorOptions, eniInfo, type Facts, gatherFacts } from "./facts.ts";
import {
  hostSysctlKeys,
  type NetnsSnapshot,
  podNetnsExists,
  readSysctls,
  snapshotNetns,
} from "./kernel.ts";
import { checkSnat } from "./snat.ts";
import type { CheckResult, DoctorReport } from "./report.ts";

/** kubelet's --max-pods: the flag given to doctor, kubelet's command line, or its config. */
export async function kubeletMaxPods(o: DoctorOptions): Promise<{ value?: number; where: string }> {
  if (o.kubeletMaxPods !== undefined) {
    return { value: o.kubeletMaxPods, where: "--kubelet-max-pods" };
  }
  let configPath = o.kubeletConfig;
  try {
    for await (const { pid, argv } of processArgvs()) {
      if (!/(^|\/)kubelet$/.test(argv[0] ?? "")) continue;
      for (let i = 0; i < argv.length; i++) {
        const m = /^--max-pods(?:=(\d+))?$/.exec(argv[i]);
        if (m) return { value: Number(m[1] ?? argv[i + 1]), where: `kubelet pid ${pid}` };
        const c = /^--config(?:=(.+))?$/.exec(argv[i]);
        if (c) configPath = c[1] ?? argv[i + 1];
      }
    }
  } catch { /* no /proc: fall through to the config file */ }
  try {
    const cfg = parseYaml(await Deno.readTextFile(configPath)) as { maxPods?: number } | null;
    if (typeof cfg?.maxPods === "number") return { value: cfg.maxPods, where: configPath };
    return { where: `${configPath} sets no maxPods (kubelet's default is 110)` };
  } catch {
    return { where: `no kubelet process or ${configPath}` };
  }
}

/**
 * Reads the plugin settings the datapath was built with, from the conflist. When vpcni is
 * only the IPAM plugin of another main plugin, the datapath is that plugin's: the answer is
 * its type (a string), and doctor does not judge its objects.
 */
export function datapathSettings(
  conflistFile: string,
  fallbackKind: string,
): DatapathSettings | string {
  const s: DatapathSettings = {
    kind:
      (["ipvlan-l2", "ipvlan-l3s", "veth"].includes(fallbackKind)
        ? fallbackKind
        : "ipvlan-l2") as DatapathSettings["kind"],
    hostVethPrefix: "vpc",
    mtu: 9001,
    serviceCidrs: [],
  };
  try {
    const list = JSON.parse(Deno.readTextFileSync(conflistFile)) as {
      plugins?: Record<string, unknown>[];
    };
    const p = list.plugins?.find((x) => x.type === "vpcni");
    const host = list.plugins?.find((x) =>
      (x.ipam as { type?: unknown } | undefined)?.type === "vpcni" && x.type !== "vpcni"
    );
    if (!p && host) return String(host.type);
    if (p) {
      if (typeof p.datapath === "string") s.kind = p.datapath as DatapathSettings["kind"];
      if (typeof p.hostVethPrefix === "string") s.hostVethPrefix = p.hostVethPrefix;
      if (typeof p.mtu === "number") s.mtu = p.mtu;
      if (Array.isArray(p.serviceCidrs)) s.serviceCidrs = p.serviceCidrs as string[];
      if (Array.isArray(p.nodeIps)) s.nodeIps = p.nodeIps as string[];
    }
  } catch { /* the CNI config check reports a missing or broken conflist */ }
  return s;
}

/** Snapshots of the host and of every allocation's pod netns that exists. */
export function kernelView(
  f: Facts,
  hostNetns = "",
): { host: NetnsSnapshot; pods: Map<string, NetnsSnapshot> } {
  const host = snapshotNetns(hostNetns);
  const pods = new Map<string, NetnsSnapshot>();
  for (const a of f.allocations) {
    if (!a.netns || pods.has(a.netns) || !podNetnsExists(a.netns)) continue;
    try {
      const pod = snapshotNetns(a.netns);
      pod.sysctls = readSysctls(hostSysctlKeys(pod.links), a.netns);
      pods.set(a.netns, pod);
    } catch { /* went away meanwhile: reported as gone */ }
  }
  return { host, pods };
}

/**
 * Whether doctor knows every allocation: from the daemon, or from a checkpoint it could
 * read. Without either, nothing may be called orphaned.
 */
export function allocationsKnown(f: Facts): boolean {
  return f.source === "daemon" || f.checkpoint !== undefined;
}

/**
 * Compares the allocations with the kernel; a string says why there is nothing to compare
 * (vpcni is only the IPAM plugin).
 */
export function datapathFindings(o: DoctorOptions, f: Facts): DatapathFindings | string {
  const settings = datapathSettings(o.conflistFile, f.config.datapath);
  if (typeof settings === "string") {
    return `vpcni is the IPAM plugin under "${settings}" (${o.conflistFile}): the datapath ` +
      `is ${settings}'s, not checked here`;
  }
  const { host, pods } = kernelView(f, o.hostNetns);
  const enis = f.enis.map((e) => eniInfo(e, f.config.routeTableBase));
  const found = analyseDatapath(
    settings,
    f.allocations,
    enis,
    host,
    pods,
    readSysctls(hostSysctlKeys(host.links), o.hostNetns || undefined),
    { allocationsKnown: allocationsKnown(f), routedUnknown: f.routedUnknown },
  );
  if (!allocationsKnown(f)) {
    // --fix refuses here (the daemon must rebuild its state first), so offer nothing, not
    // even an orphan route table.
    found.orphans = [];
    f.notes.push(
      "no daemon and no readable checkpoint: the allocations are unknown, so orphans are not " +
        "looked for and doctor datapath --fix refuses",
    );
  }
  return found;
}

/** Runs every check and returns the report. */
export async function runDoctor(o: DoctorOptions): Promise<DoctorReport> {
  const f = await gatherFacts(o);
  const checks: CheckResult[] = [checkDaemon(f, o.daemonUrl), checkImds(f)];

  const target = ec2Target(o, f.config, f.metadata);
  let probes: PermissionProbe[] | string = typeof target === "string" ? target : "IMDS unreachable";
  let subnets: Subnet[] | string = typeof target === "string" ? target : "IMDS unreachable";
  let leaked: LeakedEni[] | string = typeof target === "string" ? target : "";
  let assigned: Map<string, string[]> | undefined;
  let offset: number | undefined;
  if (typeof target !== "string") {
    const ec2 = doctorEc2Client(target, o.timeoutMs);
    try {
      const md = f.metadata;
      const [p, s, l, a, off] = await Promise.allSettled([
        md
          ? probePermissions(target, md, o.timeoutMs)
          : Promise.reject(new Error("IMDS unreachable")),
        md ? nodeSubnets(ec2, md) : Promise.reject(new Error("IMDS unreachable")),
        detachedEnis(ec2, f.config.clusterName),
        md ? attachedEnis(ec2, md.instanceId) : Promise.reject(new Error("IMDS unreachable")),
        clockOffsetSeconds(target, o.timeoutMs),
      ]);
      const why = (r: PromiseRejectedResult) => `EC2: ${(r.reason as Error).message}`;
      probes = p.status === "fulfilled" ? p.value : why(p);
      subnets = s.status === "fulfilled" ? s.value : why(s);
      leaked = l.status === "fulfilled" ? l.value : why(l);
      if (a.status === "fulfilled") {
        assigned = new Map(a.value.map((e) => [e.eniId, e.privateIps.map((x) => x.ip)]));
      }
      offset = off.status === "fulfilled" ? off.value : undefined;
    } finally {
      ec2.close();
    }
  }
  if (!assigned && f.metadata) {
    // EC2 did not answer: IMDS knows the addresses of attached ENIs too.
    assigned = new Map(f.metadata.enis.map((e) => [e.eniId, e.localIpv4s]));
  }

  checks.push(checkPermissions(probes));
  const mp = await kubeletMaxPods(o);
  checks.push(checkLimits(f, mp.value, mp.where));
  checks.push(checkPools(f));
  checks.push(checkSubnets(f, subnets));
  let dp: DatapathFindings | string;
  try {
    dp = datapathFindings(o, f);
  } catch (e) {
    dp = `cannot read the kernel: ${(e as Error).message}`;
  }
  checks.push(checkDatapath(f, dp));
  checks.push(checkSnat(f, o.hostNetns));
  checks.push(checkConsistency(f, assigned, podNetnsExists));
  checks.push(checkLeakedEnis(
    leaked,
    f.config.leakedEniGraceSeconds,
    f.config.clusterName,
    f.metadata?.instanceId,
  ));
  checks.push(await checkCniConfig(o.conflistFile, o.binDir, o.timeoutMs));
  checks.push(checkThrottling(f, offset));
  checks.push(
    checkDevicePlugin(
      f.daemon.reachable
        ? await fetchDevicePluginView(o.daemonUrl, o.timeoutMs)
        : "needs the daemon",
    ),
  );
  return {
    ok: !checks.some((c) => c.status === "fail"),
    source: f.source,
    notes: f.notes,
    checks,
  };
}
