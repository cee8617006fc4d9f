/**
 * Starts and stops the IPAM daemon: lock the state dir, learn the node, resolve pools
 * against EC2 (refusing to start half-configured), reconcile, then serve the unix API and
 * loopback introspection and run the warm loop and the leaked-ENI collector.
 *
 * Files the daemon writes (see README): `<stateDir>/ipam-checkpoint.json` (+ its temp
 * `.ipam-checkpoint.json.tmp`), `<stateDir>/ipam.lock`, the socket at `socketPath` and the netns socket beside it
 *
 * @module
 */
import type { CloudApi, SubnetInfo } from "./cloud.ts";
import type { DaemonConfig } from "./config.ts";
import { CheckpointWriter } from "./checkpoint.ts";
import { createMetrics, type DaemonMetrics } from "./metrics.ts";
import type { GrowthContext } from "./growth.ts";
import type { NodeState } from "./node_state.ts";
import { PoolManager } from "./pools.ts";
import { type NodeFacts, resolvePools } from "./pool_resolution.ts";
import { loadCheckpoint, reconcile, type ReconcileReport } from "./reconcile.ts";
import { answerRaw, serveUnixApi } from "./api.ts";
import { netnsSocketPath } from "./netns_fds.ts";
import { CniService } from "./cni_service.ts";
import { HostPreparer } from "./host_prep.ts";
import { LeakedEniCollector, trackMutations } from "./ec2_sync.ts";
import { IMDS_SETTLE_MS } from "./imds_check.ts";
import { runDaemonLoop } from "./daemon_loop.ts";
import { hostKernelView, type KernelView } from "./kernel_view.ts";
import { nodeSubnetFromImds, SUBNET_MAX_AGE_MS, SubnetCache } from "./subnet_cache.ts";
import { serveIntrospection } from "./introspect.ts";
import { log } from "./log.ts";
import { attachedEnisFromImds, changeMarker, startLimits } from "./imds_start.ts";
import { collectGarbage as collectProcessGarbage } from "./memory.ts";
import { claimStateDir, LOCK_FILE, type StateDirClaim } from "./state_dir.ts";
import { checkSocketPath } from "./unix_socket.ts";
import { EGRESS_LINK_WAIT_MS, EgressKeeper } from "./egress/keeper.ts";
import { type KubeletLink, startKubeletLinkIfEnabled } from "./kubelet/enable.ts";
import { goneReleaser } from "./gone_pods.ts";

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
    return await startLocked(cfg, c, claim, now, o.kernel ?? hostKernelView(cfg.nodeNetns), o);
  } catch (e) {
    await claim.undo();
    throw e;
  }
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
  const facts = await learnNode(cfg, cloud);
  const securityGroups = resolvePools(cfg, facts);
  const checkpoint = await loadCheckpoint(cfg, facts.node, kernel, now());
  const { state, report } = await reconcile({
    cfg,
    cloud,
    node: facts.node,
    subnets: facts.subnets,
    checkpoint,
    kernel,
    now: now(),
    described: await attachedEnisFromImds({
      cloud,
      clusterName: cfg.clusterName,
      stateDir: cfg.stateDir,
      node: facts.node,
      checkpoint,
      now: now(),
      imdsSettleMs: o.imdsSettleMs ?? IMDS_SETTLE_MS,
    }),
  });
  const metrics = createMetrics();
  const writer = checkpointWriter(cfg, state, metrics, now);
  const subnetCache = subnetCacheOf(cloud, facts, now);
  // The kubelet link reads the pools, so it starts after them; ADDs ask it once it runs.
  const linked: { kubelet?: KubeletLink } = {};
  const pools = new PoolManager({
    ctx: growthContext(cfg, cloud, state, metrics, facts, report, subnetCache, now, o),
    securityGroups,
    vpcCidrs: facts.node.vpcCidrs,
    nodeIps: facts.primary.localIpv4s.slice(0, 1),
    nodeEniMacs: facts.node.enis.map((e) => e.mac),
    save: () => writer.save(),
    poolsOfPod: (ns, name) => linked.kubelet?.poolsOfPod(ns, name) ?? Promise.resolve(undefined),
    podsBlocked: () => linked.kubelet?.podsBlocked(),
  });
  await writer.save(); // the reconciled state is the new truth
  const gone = o.headless ? undefined : goneReleaser({
    pools,
    kernel,
    socketPath: cfg.socketPath,
    now,
    count: (reason, pool) => metrics.releasedGone.inc({ reason, pool }),
  });
  // DELs that ran while the daemon was down are released before anything is served.
  await gone?.releaseRecorded().catch((e) =>
    log.warn("DEL records not processed at start (the loop retries): {error}", { error: String(e) })
  );
  const egress = startEgress(cfg, facts, state, o);
  // A new ENI's marks follow as soon as its link is on the node, not at the next IMDS check.
  if (egress) pools.growth.grew.listen(() => void egress.settle(EGRESS_LINK_WAIT_MS));
  const life = { ready: false, stopping: false };
  const serving = await startServing(cfg, pools, state, life, o, egress);
  linked.kubelet = serving.kubelet;
  const loop = runDaemonLoop({
    cfg,
    cloud,
    pools,
    kernel,
    subnetCache,
    collector: new LeakedEniCollector(pools.growth.ctx, cloud),
    save: () => writer.save(),
    syncHosts: serving.syncHosts,
    syncEgress: egress && (() => egress.sync()),
    releaseGone: gone && (() => gone.releaseAll()),
    updateEgress: egress && (async (ms) => (await egress.settle(ms)).waiting),
    // A full collection is process-wide: many node cores in one process must not each ask.
    collectGarbage: o.headless ? () => false : collectProcessGarbage,
    imdsSettleMs: o.imdsSettleMs ?? IMDS_SETTLE_MS,
    now,
    random: o.random ?? Math.random,
    onReady: () => life.ready = true,
    stopping: () => life.stopping,
  });
  logServing(cfg, facts);
  const stop = stopper(cfg, life, serving, loop, writer, claim, rawCloud);
  return {
    pools,
    metrics,
    report,
    kubelet: serving.kubelet,
    introspectionAddr: serving.introspection.addr,
    cni: serving.cni,
    finished: stop.finished,
    stop: stop.stop,
  };
}

/** What the daemon serves besides the pools (none of it in a headless core). */
interface Serving {
  kubelet?: KubeletLink;
  cni?: CniService;
  /** Sets up the host side of ENIs not done yet. */
  syncHosts: () => void;
  api: { shutdown(): Promise<void> };
  introspection: { addr: Deno.NetAddr; shutdown(): Promise<void> };
}

/**
 * Starts the kubelet link, the CNI service, each ENI's host side (those attached already,
 * then each new one as growth attaches it), the unix API and introspection.
 */
async function startServing(
  cfg: DaemonConfig,
  pools: PoolManager,
  state: NodeState,
  life: { ready: boolean },
  o: StartOptions,
  egress: EgressKeeper | undefined,
): Promise<Serving> {
  // A headless core (a fleet simulation) has no kubelet, no datapath and no servers.
  const kubelet = o.headless ? undefined : await startKubeletLinkIfEnabled(pools, cfg);
  const cni = startCniService(cfg, pools, o, egress);
  const syncHosts = hostSync(cfg, cni, state);
  pools.growth.grew.listen(syncHosts);
  syncHosts();
  const api = cni ? await serveUnixApi(cfg.socketPath, pools, cni) : NO_SERVER;
  const introspection = o.headless
    ? NO_SERVER
    : serveIntrospection(cfg.listen, cfg, pools.view, () => life.ready, {
      devicePlugin: () => kubelet?.view(),
      podsBlocked: () => kubelet?.podsBlocked(),
    });
  return { kubelet, cni, syncHosts, api, introspection };
}

/**
 * How the daemon stops: servers, loop and kubelet link first, then the last checkpoint (a
 * failed write is logged), the socket and the state dir's lock.
 */
function stopper(
  cfg: DaemonConfig,
  life: { stopping: boolean },
  serving: Serving,
  loop: Promise<void>,
  writer: CheckpointWriter,
  claim: StateDirClaim,
  rawCloud: CloudApi,
): { finished: Promise<void>; stop(): Promise<void> } {
  let resolveFinished!: () => void;
  const finished = new Promise<void>((r) => resolveFinished = r);
  return {
    finished,
    async stop() {
      if (life.stopping) return finished;
      life.stopping = true;
      await Promise.allSettled([
        serving.api.shutdown(),
        serving.introspection.shutdown(),
        loop,
        serving.kubelet?.stop(),
      ]);
      await writer.save().catch((e) =>
        log.error("the final checkpoint could not be written: {error}", {
          stateDir: cfg.stateDir,
          error: String(e),
        })
      );
      await Deno.remove(cfg.socketPath).catch(() => {});
      await Deno.remove(netnsSocketPath(cfg.socketPath)).catch(() => {});
      claim.release();
      rawCloud.close?.();
      resolveFinished();
    },
  };
}

/** Asks IMDS, then EC2 as far as the pools need, what the node is. */
async function learnNode(cfg: DaemonConfig, cloud: CloudApi): Promise<NodeFacts> {
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
  return { node, limits, primary, nodeOnly, subnets, groups };
}

/** The checkpoint writer of the node state, each write counted in metrics. */
function checkpointWriter(
  cfg: DaemonConfig,
  state: NodeState,
  metrics: DaemonMetrics,
  now: () => number,
): CheckpointWriter {
  return new CheckpointWriter(cfg.stateDir, () => {
    metrics.checkpointWrites.inc();
    return state.toCheckpoint(now());
  });
}

/**
 * Subnet free counts steer the choice of a new ENI's subnet. They are refreshed when an ENI
 * is about to be created (if older than a minute) and with each EC2 re-sync, so a node whose
 * pools are steady makes no DescribeSubnets calls. Pools on the node's subnet alone have no
 * choice to steer: a full subnet is EC2's refusal, and the re-sync refreshes.
 */
function subnetCacheOf(cloud: CloudApi, facts: NodeFacts, now: () => number): SubnetCache {
  const az = facts.node.az;
  return new SubnetCache(facts.subnets, now, () => cloud.describeSubnets({ az }), !facts.nodeOnly);
}

/** The growth context of the node (its `onGrew` is the growth service's). */
function growthContext(
  cfg: DaemonConfig,
  cloud: CloudApi,
  state: NodeState,
  metrics: DaemonMetrics,
  facts: NodeFacts,
  report: ReconcileReport,
  subnetCache: SubnetCache,
  now: () => number,
  o: StartOptions,
): Omit<GrowthContext, "onGrew"> {
  return {
    cfg,
    cloud,
    state,
    metrics,
    instanceId: facts.node.instanceId,
    az: facts.node.az,
    primarySubnetId: facts.primary.subnetId,
    maxEnis: facts.limits.maxEnis,
    ipv4PerEni: facts.limits.ipv4PerEni,
    foreignDeviceIndexes: new Set(report.foreignDeviceIndexes),
    reservedDeviceIndexes: new Set(),
    reservedSubnets: [],
    spareEnis: [],
    creating: new Set(),
    subnets: facts.subnets,
    fullSubnets: new Map(),
    refreshSubnets: facts.nodeOnly ? undefined : () => subnetCache.refresh(SUBNET_MAX_AGE_MS),
    ensureSubnetsDescribed: () => subnetCache.ensureDescribed(),
    now,
    random: o.random,
    timeScale: o.timeScale,
  };
}

/** SNAT and connection marks, applied before the first pod is served (none when headless). */
function startEgress(
  cfg: DaemonConfig,
  facts: NodeFacts,
  state: NodeState,
  o: StartOptions,
): EgressKeeper | undefined {
  if (o.headless) return undefined;
  const egress = new EgressKeeper({
    cfg,
    primary: facts.primary,
    vpcCidrs: facts.node.vpcCidrs,
    az: facts.node.az,
    subnets: facts.subnets,
    enis: () => state.enis.values(),
  });
  egress.sync();
  return egress;
}

/**
 * The CNI service, its first worker started now so the first ADD does not wait for it. A pod
 * is wired only once its ENI has its egress marks: the reservation's answer waits for them.
 */
function startCniService(
  cfg: DaemonConfig,
  pools: PoolManager,
  o: StartOptions,
  egress: EgressKeeper | undefined,
): CniService | undefined {
  if (o.headless) return undefined;
  const answer = async (body: string) => {
    const r = await answerRaw(pools, body);
    if (r.ok && "allocation" in r) await egress?.marksFor(r.allocation.eni.id);
    return r;
  };
  // cniWorkerIdleSeconds 0: the first CNI worker starts now and stays, so no pod waits for it.
  return new CniService(answer, {
    warm: cfg.cniWorkerIdleSeconds === 0,
    idleMs: (cfg.cniWorkerIdleSeconds || 60) * 1000,
    netns: cfg.nodeNetns,
  });
}

/**
 * Each ENI's host side is set up once: at start for those attached already, then for each
 * ENI attached later (the loop, and growth at once). Nothing without a CNI service.
 */
function hostSync(cfg: DaemonConfig, cni: CniService | undefined, state: NodeState) {
  const hosts = cni && new HostPreparer(cni, cfg.datapath, cfg.routeTableBase);
  return () => void hosts?.sync(state.enis.values());
}

function logServing(cfg: DaemonConfig, facts: NodeFacts) {
  log.info("vpcni IPAM daemon serving on {socket}, introspection on {listen}", {
    socket: cfg.socketPath,
    listen: cfg.listen,
    instanceId: facts.node.instanceId,
    instanceType: facts.node.instanceType,
    maxEnis: facts.limits.maxEnis,
    ipv4PerEni: facts.limits.ipv4PerEni,
  });
}

/** What a headless daemon has in place of its servers. */
const NO_SERVER = {
  addr: { transport: "tcp", hostname: "", port: 0 } as Deno.NetAddr,
  shutdown: () => Promise.resolve(),
};
