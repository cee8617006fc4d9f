/**
 * The IPAM daemon's control logic for one node, without what ties a daemon to its host: no
 * unix socket, no introspection server, no egress ruleset, no kernel. Pool logic, growth,
 * the warm loop with its IMDS checks and EC2 re-syncs, the leaked-ENI collector and the real
 * EC2 and IMDS clients (with their buckets and retries) are the daemon's own, so many node
 * cores can run in one process against one account, as the fleet bench does
 * (bench/fleet/fleet_bench.ts). Pods are served with the protocol's requests, answered as
 * the unix API would answer them.
 *
 * Each core still claims its own state directory and writes its checkpoint there, as a
 * daemon does; a restart of a core is a restart of the daemon, checkpoint and all.
 *
 * @module
 */
import type { IpamRequest, IpamResponse } from "../proto/ipam.ts";
import { handleIpamRequest } from "./api.ts";
import type { CloudApi } from "./cloud.ts";
import type { DaemonConfig } from "./config.ts";
import { type RunningDaemon, startDaemon } from "./daemon.ts";
import type { KernelView } from "./kernel_view.ts";

/** A kernel view that can tell nothing: the node core has no pods' network namespaces. */
export const NO_KERNEL: KernelView = {
  podAlive: () => Promise.resolve(undefined),
  routedPodIps: () => Promise.resolve(undefined),
  ruledPodIps: () => Promise.resolve(undefined),
};

/** Options of {@linkcode startNodeCore}. */
export interface NodeCoreOptions {
  /** Clock (epoch ms); default `Date.now`. */
  now?: () => number;
  /** Random source of the weighted subnet choice and of the start-up jitter. */
  random?: () => number;
  /** What the core may know of pods' namespaces (default {@linkcode NO_KERNEL}). */
  kernel?: KernelView;
  /** How long IMDS may lag a mutating call (the daemon's default when absent). */
  imdsSettleMs?: number;
  /**
   * Wait a uniform random time in [0, startJitterMs) before the first call, so cores started
   * together (a fleet scaling out, a rolling restart) do not reach EC2 in one burst.
   */
  startJitterMs?: number;
  /** Multiplies the daemon's built-in attach/detach waits (scaled AWS time); default 1. */
  timeScale?: number;
}

/** A running node core. */
export interface NodeCore {
  /** The daemon underneath (pools, metrics, start-up report). */
  daemon: RunningDaemon;
  /** Answers one protocol request as the unix API would. */
  request(req: IpamRequest): Promise<IpamResponse>;
  /** Stops the warm loop, saves the checkpoint and gives back the state dir. */
  stop(): Promise<void>;
}

/**
 * Starts one node's control logic. `cloud` is the node's own (its IMDS view names its
 * instance); a function makes it once the state directory is claimed.
 */
export async function startNodeCore(
  cfg: DaemonConfig,
  cloud: CloudApi | (() => Promise<CloudApi>),
  o: NodeCoreOptions = {},
): Promise<NodeCore> {
  const jitter = o.startJitterMs ?? 0;
  if (jitter > 0) {
    await new Promise((r) => setTimeout(r, (o.random ?? Math.random)() * jitter));
  }
  const daemon = await startDaemon(cfg, cloud, {
    headless: true,
    kernel: o.kernel ?? NO_KERNEL,
    now: o.now,
    random: o.random,
    imdsSettleMs: o.imdsSettleMs,
    timeScale: o.timeScale,
  });
  return {
    daemon,
    request: (req) => handleIpamRequest(daemon.pools, req),
    stop: () => daemon.stop(),
  };
}
