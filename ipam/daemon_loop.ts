/**
 * The daemon's periodic loop, every `reconcileIntervalSeconds` until it is stopped: let go of
 * routed-unknown addresses whose pods are gone and of reservations whose DEL the daemon did
 * not hear (ipam/gone_pods.ts), a warm-loop step (ipam/warm_loop.ts), each ENI's host side and
 * egress marks (the daemon is ready once the growth its first pass started has ended and every
 * ENI has them), then on their own periods the comparison with IMDS and the full EC2 re-sync
 * with the leaked-ENI collector. A step that fails is logged and the loop goes on.
 *
 * @module
 */
import type { DaemonConfig } from "./config.ts";
import type { KernelView } from "./kernel_view.ts";
import type { PoolManager } from "./pools.ts";
import { type LeakedEniCollector, resyncWithEc2, type TrackedCloud } from "./ec2_sync.ts";
import { imdsDisagreements } from "./imds_check.ts";
import type { SubnetCache } from "./subnet_cache.ts";
import { log } from "./log.ts";
import { EGRESS_LINK_WAIT_MS } from "./egress/keeper.ts";

/** What the loop works with. */
export interface DaemonLoopParts {
  cfg: DaemonConfig;
  cloud: TrackedCloud;
  pools: PoolManager;
  kernel: KernelView;
  subnetCache: SubnetCache;
  collector: LeakedEniCollector;
  /** Writes the checkpoint. */
  save: () => Promise<void>;
  /** Sets each ENI's host side up (those not done yet). */
  syncHosts: () => void;
  /** Re-applies the egress ruleset (absent in a headless core). */
  syncEgress?: () => void;
  /** Releases reservations of pods gone without a DEL the daemon heard (ipam/gone_pods.ts). */
  releaseGone?: () => Promise<unknown>;
  /**
   * Brings the egress ruleset up to the pools' ENIs if they changed, waiting up to `waitMs`
   * for links not on the node yet; the ids of ENIs whose marks still wait for their link.
   */
  updateEgress?: (waitMs: number) => Promise<string[]>;
  /** A full garbage collection, where the process allows one. */
  collectGarbage: () => unknown;
  /** How long IMDS may lag a mutating call. */
  imdsSettleMs: number;
  now: () => number;
  /** A number in [0, 1), for the first re-sync's jitter. */
  random: () => number;
  /** Called after the first pass: the daemon is ready. */
  onReady: () => void;
  /** True once the daemon stops. */
  stopping: () => boolean;
}

/** Runs the loop until `stopping()`; resolves when it has ended. */
export async function runDaemonLoop(p: DaemonLoopParts): Promise<void> {
  const { cfg, now } = p;
  // The start read IMDS and the checkpoint (or EC2 when IMDS could lag). EC2 is asked when
  // a leak found now would be past its grace, at a random moment within startJitterSeconds
  // after that, so nodes started together do not describe in one burst.
  let nextEc2Sync = now() +
    1000 * (Math.min(cfg.leakedEniGraceSeconds, cfg.ec2ResyncSeconds) +
        p.random() * cfg.startJitterSeconds);
  let lastImdsCheck = now();
  let ready = false;
  let heldFor = ""; // the ENIs readiness last waited for, logged once
  while (!p.stopping()) {
    try {
      await releaseUnrouted(p);
      await p.releaseGone?.();
      await p.pools.tick();
      // The ENIs the start's growth attaches are the node's from the start: ready comes after.
      if (!ready) await p.pools.growth.runsEnded();
      p.syncHosts();
      // Ready only once every ENI's connection marks are in place: a connection that enters
      // by an ENI without them is answered by the wrong one.
      const unmarked = await p.updateEgress?.(ready ? 0 : EGRESS_LINK_WAIT_MS) ?? [];
      if (!ready && unmarked.length > 0) {
        if (unmarked.join() !== heldFor) {
          log.info("not ready yet: no link on the node for {enis}, whose egress marks wait", {
            enis: unmarked.join(", "),
          });
        }
        heldFor = unmarked.join();
      } else if (!ready) {
        p.collectGarbage(); // start-up garbage (SDK set-up, first answers) goes now
        p.onReady();
        ready = true;
      }
      let ec2Due = now() >= nextEc2Sync;
      if (!ec2Due && now() - lastImdsCheck >= cfg.imdsCheckSeconds * 1000) {
        lastImdsCheck = now();
        ec2Due = await imdsDisagree(p);
        if (!ec2Due) p.collectGarbage(); // a quiet moment, once a minute
        if (!ec2Due) p.syncEgress?.();
      }
      if (ec2Due) {
        lastImdsCheck = now();
        nextEc2Sync = now() + cfg.ec2ResyncSeconds * 1000;
        await resyncEc2(p);
      }
    } catch (e) {
      log.warn("warm loop step failed: {error}", { error: String(e) });
    }
    await sleepUnless(cfg.reconcileIntervalSeconds * 1000, p.stopping);
  }
}

/** Addresses held after a lost checkpoint go once the host stops routing them to a pod. */
async function releaseUnrouted(p: DaemonLoopParts): Promise<void> {
  if (p.pools.view.routedUnknown().length === 0) return;
  const routed = await p.kernel.routedPodIps();
  if (routed) await p.pools.allocator.releaseUnrouted(routed);
}

/** Whether IMDS disagrees with the node state (then EC2 is asked at once). */
async function imdsDisagree(p: DaemonLoopParts): Promise<boolean> {
  const found = await imdsDisagreements(p.pools.growth.ctx, p.cloud, p.imdsSettleMs);
  if (!found?.length) return false;
  log.info("IMDS disagrees with the node state ({found}); re-syncing with EC2", {
    found: found.join("; "),
  });
  return true;
}

/** The full EC2 re-sync: subnets, the node's ENIs and addresses, leaked ENIs, egress. */
async function resyncEc2(p: DaemonLoopParts): Promise<void> {
  await p.subnetCache.refresh(0);
  if (await resyncWithEc2(p.pools.growth.ctx, p.cloud)) await p.save();
  await p.collector.collect();
  p.syncEgress?.();
  p.collectGarbage();
}

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
