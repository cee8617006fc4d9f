/**
 * Starts and stops the IPAM daemon: lock the state dir, learn the node, resolve pools
 * against EC2 (refusing to start half-configured), reconcile, then serve the unix API and
 * loopback introspection and run the warm loop and the leaked-ENI collector.
 *
 * Files the daemon writes (see README): `<stateDir>/ipam-checkpoint.json` (+ its temp
 * `.ipam-checkpoint.json.tmp`), `<stateDir>/ipam.lock`, and the socket at `socketPath`.
 *
 * @module
 */
import type { CloudApi, SecurityGroupInfo, SubnetInfo } from "./cloud.ts";
import {
  ConfigError,
  type DaemonConfig,
  MAX_COOLDOWN_SECONDS,
  ROUTE_TABLE_SPAN,
  subnetChoice,
} from "./config.ts";
import {
  type Checkpoint,
  CheckpointWriter,
  hasDuplicateAttachments,
  readCheckpoint,
  repairCheckpoint,
} from "./checkpoint.ts";
import { createMetrics, type DaemonMetrics } from "./metrics.ts";
import type { GrowthContext } from "./growth.ts";
import { PoolManager } from "./pools.ts";
import { reconcile, type ReconcileReport } from "./reconcile.ts";
import { matchSubnets } from "./subnets.ts";
import { matchesTags, parseSelector } from "./selector.ts";
import { answerRaw, serveUnixApi } from "./api.ts";
import { CniService } from "./cni_service.ts";
import { HostPreparer } from "./host_prep.ts";
import { LeakedEniCollector, resyncWithEc2, trackMutations } from "./ec2_sync.ts";
import { IMDS_SETTLE_MS, imdsDisagreements } from "./imds_check.ts";
import { hostKernelView, type KernelView } from "./kernel_view.ts";
import { nodeSubnetFromImds, SUBNET_MAX_AGE_MS, SubnetCache } from "./subnet_cache.ts";
import { serveIntrospection } from "./introspect.ts";
import { log } from "./log.ts";
import { attachedEnisFromImds, changeMarker, startLimits } from "./imds_start.ts";
import { collectGarbage as collectProcessGarbage } from "./memory.ts";
import { claimStateDir, LOCK_FILE, type StateDirClaim } from "./state_dir.ts";
import { checkSocketPath } from "./unix_socket.ts";
import { EgressKeeper } from "./egress/keeper.ts";
import { type KubeletLink, startKubeletLinkIfEnabled } from "./kubelet/enable.ts";

export { LOCK_FILE };

/** A running daemon. */
export interface RunningDaemon {
  pools: PoolManager;
  metrics: DaemonMetrics;
  report: ReconcileReport;
  /** The device plugin and pod-resources link, when `devicePlugin` turned it on. */
  kubelet?: KubeletLink;
  /** Where introspection listens (useful when `listen` asked for port 0). */
  introspectionAddr: Deno.NetAddr;
  /** Runs the CNI invocations the thin plugin forwards (none in a headless core). */
  cni?: CniService;
  /** Resolves when the daemon has stopped. */
  finished: Promise<void>;
  stop(): Promise<void>;
}

/** Resolves each pool's security groups; errors name the pool's knob. */
function resolveSecurityGroups(
  cfg: DaemonConfig,
  primarySgs: string[],
  groups: SecurityGroupInfo[],
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const problems: string[] = [];
  cfg.pools.forEach((p, i) => {
    const sg = p.securityGroups;
    if (sg === "primary") out.set(p.name, primarySgs);
    else if ("ids" in sg) {
      const missing = sg.ids.filter((id) => !groups.some((g) => g.id === id));
      if (missing.length) {
        problems.push(`pools[${i}].securityGroups: no such security group ${missing.join(", ")}`);
      }
      out.set(p.name, sg.ids);
    } else {
      const sel = parseSelector(sg.tags);
      const ids = groups.filter((g) => matchesTags(sel, g.tags)).map((g) => g.id);
      if (ids.length === 0) {
        problems.push(`pools[${i}].securityGroups: tag selector "${sg.tags}" matches no group`);
      } else if (ids.length > 5) {
        problems.push(
          `pools[${i}].securityGroups: tag selector "${sg.tags}" matches ${ids.length} groups ` +
            `(an ENI takes at most 5)`,
        );
      }
      out.set(p.name, ids.slice(0, 5));
    }
  });
  if (problems.length) throw new ConfigError("pools resolved against EC2", problems);
  return out;
}

/** How a daemon is wired to the world; every field has a production default. */
export interface StartOptions {
  /** Which pod interfaces exist (default: the netns paths the allocations name). */
  kernel?: KernelView;
  /** Clock (epoch ms). */
  now?: () => number;
  /** Random source of the weighted subnet choice. */
  random?: () => number;
  /** How long IMDS may lag a mutating call (default {@linkcode IMDS_SETTLE_MS}). */
  imdsSettleMs?: number;
  /**
   * Only the node's control logic (ipam/node_core.ts, for fleet simulations): no unix API,
   * no introspection server, no egress ruleset; pods are served through `pools`.
   */
  headless?: boolean;
  /** Multiplies the built-in attach/detach waits (a simulation on scaled AWS time); default 1. */
  timeScale?: number;
}

/**
 * Starts the daemon with a cloud (the real one, or the simulator's through the real SDK), or
 * with a function that makes one once the state directory is claimed. What is at `stateDir`
 * and `socketPath` is checked before anything is created; another daemon on the state dir is
 * refused at once; a start that fails gives back the state dir and lock it created.
 */
export async function startDaemon(
  cfg: DaemonConfig,
  cloud: CloudApi | (() => Promise<CloudApi>),
  o: StartOptions = {},
): Promise<RunningDaemon> {
  const now = o.now ?? Date.now;
  const claim = await claimStateDir(cfg.stateDir);
  try {
    await checkSocketPath(cfg.socketPath);
    const c = typeof cloud === "function" ? await cloud() : cloud;
    return await startLocked(cfg, c, claim, now, o.kernel ?? hostKernelView(), o);
  } catch (e) {
    await claim.undo();
    throw e;
  }
}

/** The checkpoint made safe to reconcile (ipam/checkpoint.ts), each repair logged. */
async function repaired(
  cfg: DaemonConfig,
  cp: Checkpoint,
  kernel: KernelView,
  now: number,
): Promise<Checkpoint> {
  const routed = hasDuplicateAttachments(cp) ? await kernel.routedPodIps() : undefined;
  const { checkpoint, warnings } = repairCheckpoint(cp, {
    now,
    maxCooldownMs: MAX_COOLDOWN_SECONDS * 1000,
    cooldownMs: (pool) => (cfg.pools.find((p) => p.name === pool)?.ipCooldownSeconds ?? 30) * 1000,
    routed,
  });
  for (const w of warnings) log.warn("{warning}", { warning: w, stateDir: cfg.stateDir });
  return checkpoint;
}

async function startLocked(
  cfg: DaemonConfig,
  rawCloud: CloudApi,
  claim: StateDirClaim,
  now: () => number,
  kernel: KernelView,
  o: StartOptions,
): Promise<RunningDaemon> {
  const cloud = trackMutations(rawCloud, now, changeMarker(cfg.stateDir));
  const node = await cloud.nodeMetadata();
  const limits = await startLimits(cloud, node.instanceType, cfg.stateDir);
  const primary = node.enis.find((e) => e.deviceIndex === 0);
  if (!primary) throw new Error("IMDS shows no primary ENI (device index 0)");
  // Pools that use only the node's subnet need nothing from EC2 to start: IMDS names it
  // (unless an ENI is already attached in another subnet, whose CIDR only EC2 knows).
  const nodeOnly = cfg.pools.every((p) => p.subnets === "node") &&
    node.enis.every((e) => e.subnetId === primary.subnetId);
  const subnets: SubnetInfo[] = nodeOnly
    ? [nodeSubnetFromImds(primary, node.az)]
    : await cloud.describeSubnets({ az: node.az });
  // Pools on the primary ENI's groups need no lookup (IMDS named them).
  const groups = cfg.pools.some((p) => p.securityGroups !== "primary")
    ? await cloud.describeSecurityGroups()
    : [];

  const problems: string[] = [];
  cfg.pools.forEach((p, i) => {
    const matched = matchSubnets(subnetChoice(p), subnets, {
      az: node.az,
      primarySubnetId: primary.subnetId,
    });
    if (matched.length === 0) {
      problems.push(`pools[${i}].subnets: matches no subnet in ${node.az}`);
    }
    if (i === 0 && limits.maxEnis > ROUTE_TABLE_SPAN) {
      problems.push(
        `routeTableBase: the instance's ${limits.maxEnis} ENIs need more than the ` +
          `${ROUTE_TABLE_SPAN} route tables this daemon reserves from routeTableBase`,
      );
    }
    if (p.firstInterfaceIndex >= limits.maxEnis) {
      problems.push(
        `pools[${i}].firstInterfaceIndex: ${p.firstInterfaceIndex} is not below the ` +
          `instance's ${limits.maxEnis} ENIs`,
      );
    }
  });
  if (problems.length) throw new ConfigError("pools resolved against EC2", problems);
  const securityGroups = resolveSecurityGroups(cfg, primary.securityGroupIds, groups);

  let checkpoint = await readCheckpoint(cfg.stateDir);
  if (checkpoint && checkpoint.instanceId !== node.instanceId) {
    log.warn("checkpoint belongs to {other}, this is {instanceId}; starting empty", {
      other: checkpoint.instanceId,
      instanceId: node.instanceId,
    });
    checkpoint = undefined;
  }
  if (checkpoint) checkpoint = await repaired(cfg, checkpoint, kernel, now());
  const { state, report } = await reconcile({
    cfg,
    cloud,
    node,
    subnets,
    checkpoint,
    kernel,
    now: now(),
    described: await attachedEnisFromImds({
      cloud,
      clusterName: cfg.clusterName,
      stateDir: cfg.stateDir,
      node,
      checkpoint,
      now: now(),
      imdsSettleMs: o.imdsSettleMs ?? IMDS_SETTLE_MS,
    }),
  });

  const metrics = createMetrics();
  // Subnet free counts steer the choice of a new ENI's subnet. They are refreshed when an
  // ENI is about to be created (if older than a minute) and with each EC2 re-sync, so a
  // node whose pools are steady makes no DescribeSubnets calls. Pools on the node's subnet
  // alone have no choice to steer: a full subnet is EC2's refusal, and the re-sync refreshes.
  const subnetCache = new SubnetCache(
    subnets,
    now,
    () => cloud.describeSubnets({ az: node.az }),
    !nodeOnly,
  );
  const ctx: GrowthContext = {
    cfg,
    cloud,
    state,
    metrics,
    instanceId: node.instanceId,
    az: node.az,
    primarySubnetId: primary.subnetId,
    maxEnis: limits.maxEnis,
    ipv4PerEni: limits.ipv4PerEni,
    foreignDeviceIndexes: new Set(report.foreignDeviceIndexes),
    reservedDeviceIndexes: new Set(),
    reservedSubnets: [],
    creating: new Set(),
    subnets,
    fullSubnets: new Map(),
    refreshSubnets: nodeOnly ? undefined : () => subnetCache.refresh(SUBNET_MAX_AGE_MS),
    ensureSubnetsDescribed: () => subnetCache.ensureDescribed(),
    onGrew: () => {},
    now,
    random: o.random,
    timeScale: o.timeScale,
  };
  const writer = new CheckpointWriter(cfg.stateDir, () => {
    metrics.checkpointWrites.inc();
    return state.toCheckpoint(now());
  });
  const pools = new PoolManager({
    ctx,
    securityGroups,
    vpcCidrs: node.vpcCidrs,
    nodeIps: primary.localIpv4s.slice(0, 1),
    nodeEniMacs: node.enis.map((e) => e.mac),
    save: () => writer.save(),
  });
  await writer.save(); // the reconciled state is the new truth
  const egress = o.headless ? undefined : new EgressKeeper({
    cfg,
    primary,
    vpcCidrs: node.vpcCidrs,
    az: node.az,
    subnets,
    enis: () => state.enis.values(),
  });
  egress?.sync(); // SNAT and connection marks before the first pod is served

  // A full collection is process-wide: many node cores in one process must not each ask.
  const collectGarbage = o.headless ? () => false : collectProcessGarbage;
  // A headless core (a fleet simulation) has no kubelet, no datapath and no servers.
  const kubelet = o.headless ? undefined : await startKubeletLinkIfEnabled(pools, cfg);
  if (kubelet) pools.poolsOfPod = (ns, name) => kubelet.poolsOfPod(ns, name);

  let ready = false;
  // The first CNI worker starts now, so the first pod's ADD does not wait for it.
  const cni = o.headless ? undefined : new CniService((body) => answerRaw(pools, body), {
    warm: true,
    netns: cfg.nodeNetns,
  });
  // Each ENI's host side is set up once, here for those attached already; the loop below
  // does it for ENIs attached later, and growth asks for it at once.
  const hosts = cni && new HostPreparer(cni, cfg.datapath, cfg.routeTableBase);
  const syncHosts = () => void hosts?.sync(state.enis.values());
  const grew = ctx.onGrew;
  ctx.onGrew = () => {
    grew();
    syncHosts();
  };
  syncHosts();
  const api = cni ? await serveUnixApi(cfg.socketPath, pools, cni) : NO_SERVER;
  const introspection = o.headless
    ? NO_SERVER
    : serveIntrospection(cfg.listen, cfg, pools, () => ready, {
      devicePlugin: () => kubelet?.view(),
    });

  let stopping = false;
  let resolveFinished!: () => void;
  const finished = new Promise<void>((r) => resolveFinished = r);
  const collector = new LeakedEniCollector(ctx, cloud);
  const loop = (async () => {
    // The start read IMDS and the checkpoint (or EC2 when IMDS could lag). EC2 is asked when
    // a leak found now would be past its grace, at a random moment within startJitterSeconds
    // after that, so nodes started together do not describe in one burst.
    let nextEc2Sync = now() +
      1000 * (Math.min(cfg.leakedEniGraceSeconds, cfg.ec2ResyncSeconds) +
          (o.random ?? Math.random)() * cfg.startJitterSeconds);
    let lastImdsCheck = now();
    while (!stopping) {
      try {
        if (state.routedUnknown.size) {
          const routed = await kernel.routedPodIps();
          const cooldown = (ip: string) =>
            (cfg.pools.find((p) => p.name === state.ownerOf(ip)?.pool)?.ipCooldownSeconds ?? 30) *
            1000;
          if (routed && state.releaseUnrouted(routed, now(), cooldown)) {
            await writer.save();
            ctx.onGrew();
          }
        }
        await pools.tick();
        syncHosts();
        if (!ready) collectGarbage(); // start-up garbage (SDK set-up, first answers) goes now
        ready = true;
        let ec2Due = now() >= nextEc2Sync;
        if (!ec2Due && now() - lastImdsCheck >= cfg.imdsCheckSeconds * 1000) {
          lastImdsCheck = now();
          const found = await imdsDisagreements(ctx, cloud, o.imdsSettleMs ?? IMDS_SETTLE_MS);
          if (found?.length) {
            log.info("IMDS disagrees with the node state ({found}); re-syncing with EC2", {
              found: found.join("; "),
            });
            ec2Due = true;
          }
          if (!ec2Due) collectGarbage(); // a quiet moment, once a minute
          if (!ec2Due) egress?.sync();
        }
        if (ec2Due) {
          lastImdsCheck = now();
          nextEc2Sync = now() + cfg.ec2ResyncSeconds * 1000;
          await subnetCache.refresh(0);
          if (await resyncWithEc2(ctx, cloud)) await writer.save();
          await collector.collect();
          egress?.sync();
          collectGarbage();
        }
      } catch (e) {
        log.warn("warm loop step failed: {error}", { error: String(e) });
      }
      await sleepUnless(cfg.reconcileIntervalSeconds * 1000, () => stopping);
    }
  })();

  log.info("vpcni IPAM daemon serving on {socket}, introspection on {listen}", {
    socket: cfg.socketPath,
    listen: cfg.listen,
    instanceId: node.instanceId,
    instanceType: node.instanceType,
    maxEnis: limits.maxEnis,
    ipv4PerEni: limits.ipv4PerEni,
  });

  return {
    pools,
    metrics,
    report,
    kubelet,
    introspectionAddr: introspection.addr,
    cni,
    finished,
    async stop() {
      if (stopping) return finished;
      stopping = true;
      await Promise.allSettled([
        api.shutdown(),
        introspection.shutdown(),
        loop,
        kubelet?.stop(),
      ]);
      await writer.save().catch((e) =>
        log.error("the final checkpoint could not be written: {error}", {
          stateDir: cfg.stateDir,
          error: String(e),
        })
      );
      await Deno.remove(cfg.socketPath).catch(() => {});
      claim.release();
      rawCloud.close?.();
      resolveFinished();
    },
  };
}

/** What a headless daemon has in place of its servers. */
const NO_SERVER = {
  addr: { transport: "tcp", hostname: "", port: 0 } as Deno.NetAddr,
  shutdown: () => Promise.resolve(),
};

function sleepUnless(ms: number, stop: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const step = Math.min(ms, 200);
    let left = ms;
    const t = setInterval(() => {
      left -= step;
      if (left <= 0 || stop()) {
        clearInterval(t);
        resolve();
      }
    }, step);
  });
}
