/**
 * Whether the daemon talks to the kubelet (knob `devicePlugin`: `auto` talks to it once a
 * kubelet answers on its registration socket, `on` always, `off` never) and the shape of that
 * link. This module imports no gRPC: the daemon loads ./link.ts, and with it `@grpc/grpc-js`,
 * only when the link is on.
 *
 * @module
 */
import type { PoolManager } from "../pools.ts";
import type { RegistrationView } from "./device_plugin.ts";
import type { PoolCapacity } from "./capacity.ts";
import { kubeletAnswers, kubeletSocketPath } from "./kubelet_socket.ts";
import { log } from "../log.ts";

/** How long an ADD waits for the kubelet's pod-resources answer before using annotations. */
export const POD_RESOURCES_TIMEOUT_MS = 2_000;

/** The knobs the link reads. */
export interface KubeletLinkOptions {
  devicePluginDir: string;
  podResourcesSocket: string;
  timeoutMs: number;
}

/** One ADD's question to pod-resources and its answer (pools held, or why none came). */
export interface PodLookup {
  at: string;
  /** `namespace/name`. */
  pod: string;
  pools?: string[];
  error?: string;
  /** Why the answer came without asking pod-resources. */
  note?: string;
}

/** What introspection shows of the link. */
export interface PoolCapacityView extends RegistrationView {
  enabled: true;
  /** Whether pod-resources has answered at least once. */
  podResourcesKnown: boolean;
  podResourcesError?: string;
  /** Why no pod can start now, when pod-resources must be asked and does not answer. */
  podsBlocked?: string;
  /** The latest ADDs' lookups, oldest first: why a pod got the pool it got. */
  recentLookups: PodLookup[];
  pools: ({ pool: string; resource: string } & Partial<PoolCapacity> & { devices?: number })[];
}

/** What introspection shows while the link is off, and why. */
export interface DevicePluginOff {
  enabled: false;
  reason: string;
}

/** The running link. */
export interface KubeletLink {
  /**
   * The pools whose devices the pod holds (empty: none). Rejects when the kubelet does not
   * answer in time: the ADD is then answered "try again", never with a guessed pool.
   */
  poolsOfPod(namespace: string, name: string): Promise<string[] | undefined>;
  /**
   * Why no pod can start now (pod-resources must be asked, since a pod may hold a device,
   * and it does not answer); undefined while pods can. Readiness and STATUS report it.
   */
  podsBlocked(): string | undefined;
  /** Registration and each pool's advertised capacity, or why the link is off for now. */
  view(): PoolCapacityView | DevicePluginOff;
  stop(): Promise<void>;
}

/** The device-plugin knobs of the configuration. */
export interface DevicePluginKnobs {
  devicePlugin: "auto" | "on" | "off";
  devicePluginDir: string;
  podResourcesSocket: string;
}

/** How often `auto` looks for a kubelet while none answers. */
const AUTO_CHECK_MS = 1_000;

/**
 * Starts the link when the knobs ask for it; undefined when it stays off. `auto` gives a
 * link that stays off (no socket made, nothing asked) until a kubelet answers on
 * `<devicePluginDir>/kubelet.sock`, then turns on for good (kubelet restarts are the
 * running link's to follow).
 */
export async function startKubeletLinkIfEnabled(
  pools: PoolManager,
  k: DevicePluginKnobs,
): Promise<KubeletLink | undefined> {
  if (k.devicePlugin === "off") return undefined;
  const o: KubeletLinkOptions = {
    devicePluginDir: k.devicePluginDir,
    podResourcesSocket: k.podResourcesSocket,
    timeoutMs: POD_RESOURCES_TIMEOUT_MS,
  };
  if (k.devicePlugin === "on") {
    await Deno.mkdir(k.devicePluginDir, { recursive: true });
    return await startLink(pools, o);
  }
  return linkOnceKubeletAnswers(pools, o);
}

async function startLink(pools: PoolManager, o: KubeletLinkOptions): Promise<KubeletLink> {
  const { startKubeletLink } = await import("./link.ts");
  return startKubeletLink(pools, o);
}

/** `auto`: off until a kubelet answers on its registration socket, then the link. */
function linkOnceKubeletAnswers(pools: PoolManager, o: KubeletLinkOptions): KubeletLink {
  const socket = kubeletSocketPath(o.devicePluginDir);
  const reason = `devicePlugin auto: no kubelet answers on ${socket} (yet); ` +
    "it turns on when one does";
  let link: KubeletLink | undefined;
  let starting: Promise<void> | undefined;
  let stopped = false;
  /** Starts the link if a kubelet answers now; resolves once that is settled. */
  const check = (): Promise<void> => {
    if (link || stopped) return Promise.resolve();
    starting ??= (async () => {
      if (!await kubeletAnswers(socket)) return;
      log.info("a kubelet answers on {socket}: advertising pool capacity", { socket });
      const started = await startLink(pools, o);
      if (stopped) await started.stop();
      else link = started;
    })().catch((e) => log.warn("the kubelet link did not start: {error}", { error: String(e) }))
      .finally(() => starting = undefined);
    return starting;
  };
  log.info("no kubelet answers on {socket}: pool capacity is not advertised until one does", {
    socket,
  });
  const timer = setInterval(check, AUTO_CHECK_MS);
  void check();
  return {
    async poolsOfPod(namespace, name) {
      // A kubelet that came up since the last look may already hand out devices of an
      // earlier registration: look now rather than guess.
      if (!link) await check();
      // No kubelet: no pod holds a device of ours, and nothing is asked.
      return link ? link.poolsOfPod(namespace, name) : [];
    },
    podsBlocked: () => link?.podsBlocked(),
    view: () => link?.view() ?? { enabled: false, reason },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await starting;
      await link?.stop();
    },
  };
}
