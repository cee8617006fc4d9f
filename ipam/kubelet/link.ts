/**
 * The daemon's link to the kubelet: every second it works out each pool's capacity and
 * publishes it as devices of `vpcni.io/<pool>` (asking pod-resources which pods hold which
 * devices when the pods or the counts changed), and it answers which pool a pod's devices
 * name for an ADD. Pod-resources is asked only while a pod may hold one of our devices:
 * the kubelet took our registration, or a kubelet answers on its socket. Without a kubelet
 * no pod can, so a pod gets its pool from annotations without waiting on anyone. Loaded
 * only when the device plugin is on (it pulls in gRPC).
 *
 * @module
 */
import type { PoolManager } from "../pools.ts";
import { attachmentKey } from "../node_state.ts";
import { deviceIds, type PoolCapacity, poolCapacity } from "./capacity.ts";
import { DevicePlugin } from "./device_plugin.ts";
import {
  type HeldDevices,
  heldDevices,
  PodResourcesClient,
  resourceName,
} from "./pod_resources.ts";
import type { KubeletLink, KubeletLinkOptions, PodLookup, PoolCapacityView } from "./enable.ts";
import { kubeletAnswers, kubeletSocketPath } from "./kubelet_socket.ts";
import { log } from "../log.ts";

const TICK_MS = 1_000;
/** Pod-resources is asked again at least this often, to follow devices the kubelet hands out. */
const LIST_EVERY_MS = 10_000;
/** While pod-resources does not answer (and pods wait on it), it is asked again this often. */
const RETRY_FAILED_MS = 5_000;
/** How many of the latest ADD lookups introspection shows. */
const RECENT_LOOKUPS = 16;

/** Starts the device plugin and the pod-resources client. */
export function startKubeletLink(pools: PoolManager, o: KubeletLinkOptions): KubeletLink {
  const names = [...pools.pools.keys()];
  const plugin = new DevicePlugin(o.devicePluginDir, names);
  const podResources = new PodResourcesClient(o.podResourcesSocket, o.timeoutMs);
  let held: HeldDevices = new Map();
  let heldKnown = false;
  let listedAt = -Infinity;
  let lastSignature = "";
  let lastCounts = "";
  let listError: string | undefined;
  /** Whether a pod may hold one of our devices, as last seen (see {@linkcode mayHoldDevices}). */
  let devicesPossible = false;
  const kubeletSocket = kubeletSocketPath(o.devicePluginDir);
  /**
   * A pod can hold a device of ours only through a kubelet: one that took our registration,
   * or one that answers now (it may hand out devices of an earlier registration, from its
   * checkpoint, before ours is made again). A unix connect answers at once.
   */
  const mayHoldDevices = async () =>
    devicesPossible = plugin.view().registered || await kubeletAnswers(kubeletSocket);
  const capacities = new Map<string, PoolCapacity & { devices: number }>();
  const lookups: PodLookup[] = [];
  const remember = (l: Omit<PodLookup, "at">) => {
    lookups.push({ at: new Date().toISOString(), ...l });
    if (lookups.length > RECENT_LOOKUPS) lookups.shift();
  };
  let stopped = false;
  let running: Promise<void> | undefined;

  const refresh = async () => {
    const now = pools.view.now();
    const signature = pools.view.allocations().map(attachmentKey).join(",");
    const compute = () =>
      [...pools.pools.values()].map((rt) =>
        poolCapacity(
          pools.view.capacityNode(),
          rt.cfg,
          rt.choice,
          now,
          (ns, name) => held.get(rt.cfg.name)?.has(`${ns}/${name}`) ?? false,
        )
      );
    let caps = compute();
    const counts = caps.map((c) => `${c.pool}=${c.room}`).join(",");
    const wasPossible = devicesPossible;
    if (!await mayHoldDevices()) {
      // No kubelet: nothing to ask, and nobody waits on its answer. What pods were last seen
      // to hold stays, for when the kubelet is back.
      if (listError) {
        log.info("no kubelet answers on {socket}: pods no longer wait on it", {
          socket: kubeletSocket,
        });
      }
      listError = undefined;
    } else if (
      !wasPossible || signature !== lastSignature || counts !== lastCounts ||
      Date.now() - listedAt > (listError ? RETRY_FAILED_MS : LIST_EVERY_MS)
    ) {
      try {
        held = heldDevices(await podResources.list());
        heldKnown = true;
        listedAt = Date.now();
        if (listError) log.info("kubelet pod-resources answers again", {});
        listError = undefined;
        lastSignature = signature;
        lastCounts = counts;
        caps = compute();
      } catch (e) {
        const error = (e as Error).message;
        if (error !== listError) {
          log.warn("kubelet pod-resources at {socket} did not answer: {error}", {
            socket: o.podResourcesSocket,
            error,
          });
        }
        listError = error;
        // Asked again after RETRY_FAILED_MS or the next change, not on every tick.
        listedAt = Date.now();
        lastSignature = signature;
        lastCounts = counts;
      }
    }
    for (const c of caps) {
      const allocated = [...(held.get(c.pool)?.values() ?? [])].flat();
      // Devices pods already hold stay listed, even if the room shrank below them.
      const ids = deviceIds(c.pool, Math.max(c.advertised, allocated.length), allocated);
      capacities.set(c.pool, { ...c, devices: ids.length });
      plugin.publish(c.pool, ids);
    }
  };
  const tick = () => {
    if (stopped || running) return;
    running = refresh().catch((e) =>
      log.warn("capacity refresh failed: {error}", { error: String(e) })
    )
      .finally(() => running = undefined);
  };
  // The first list comes before the kubelet is first asked for devices.
  tick();
  plugin.start();
  const timer = setInterval(tick, TICK_MS);

  /** Why pods cannot start: a pod may hold a device, and pod-resources does not answer. */
  function podsBlocked(): string | undefined {
    if (!devicesPossible || listError === undefined) return undefined;
    return `the kubelet's pod-resources API at ${o.podResourcesSocket} does not answer ` +
      `(${listError}) while a kubelet serves ${kubeletSocket}: an ADD cannot tell whether its ` +
      "pod holds a vpcni.io/<pool> device and is answered 'try again'; mount the kubelet's " +
      "pod-resources directory into the daemon (knob podResourcesSocket), or set " +
      "devicePlugin: off where no pod requests vpcni.io/* resources";
  }

  return {
    /** Throws {@linkcode PodResourcesUnavailable} when the kubelet does not answer in time. */
    async poolsOfPod(namespace, name) {
      const pod = `${namespace}/${name}`;
      if (!await mayHoldDevices()) {
        remember({ pod, pools: [], note: "no kubelet answers: not asked" });
        return [];
      }
      try {
        const found = await podResources.podPools(namespace, name);
        listError = undefined;
        remember({ pod, pools: found });
        log.debug("pod {pod} holds devices of {pools}", { pod, pools: found.join(", ") || "none" });
        return found;
      } catch (e) {
        remember({ pod, error: (e as Error).message });
        // Readiness says so at once; the next tick asks again.
        listError = (e as Error).message;
        log.warn(
          "kubelet pod-resources did not say which pool {namespace}/{name} holds ({error}); " +
            "the ADD is answered 'try again' rather than with a guessed pool",
          { namespace, name, error: (e as Error).message },
        );
        throw new PodResourcesUnavailable(pod, (e as Error).message);
      }
    },
    podsBlocked,
    view(): PoolCapacityView {
      const blocked = podsBlocked();
      return {
        enabled: true,
        ...plugin.view(),
        podResourcesKnown: heldKnown,
        recentLookups: [...lookups],
        ...(listError ? { podResourcesError: listError } : {}),
        ...(blocked ? { podsBlocked: blocked } : {}),
        pools: names.map((pool) => ({
          pool,
          resource: resourceName(pool),
          ...(capacities.get(pool) ?? {}),
        })),
      };
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
      await plugin.stop();
      podResources.close();
    },
  };
}

/**
 * The kubelet's pod-resources API did not say which pool's devices a pod holds. A pod that
 * asked for `vpcni.io/<pool>` must get that pool, so the ADD is answered "try again" (the
 * runtime retries the sandbox) rather than with the annotation's or the default pool.
 */
export class PodResourcesUnavailable extends Error {
  /** `pod` is namespace/name; `reason` what the kubelet's API call ended with. */
  constructor(readonly pod: string, readonly reason: string) {
    super(`the kubelet's pod-resources API did not say which pool ${pod} holds: ${reason}`);
    this.name = "PodResourcesUnavailable";
  }
}
