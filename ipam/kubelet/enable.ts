/**
 * Whether the daemon talks to the kubelet (knob `devicePlugin`: `auto` talks to it when
 * the device-plugin directory exists, `on` always, `off` never) and the shape of that link.
 * This module imports no gRPC: the daemon loads ./link.ts, and with it `@grpc/grpc-js`, only
 * when the link is on.
 *
 * @module
 */
import type { PoolManager } from "../pools.ts";
import type { RegistrationView } from "./device_plugin.ts";
import type { PoolCapacity } from "./capacity.ts";
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
}

/** What introspection shows of the link. */
export interface PoolCapacityView extends RegistrationView {
  /** Whether pod-resources has answered at least once. */
  podResourcesKnown: boolean;
  podResourcesError?: string;
  /** The latest ADDs' lookups, oldest first: why a pod got the pool it got. */
  recentLookups: PodLookup[];
  pools: ({ pool: string; resource: string } & Partial<PoolCapacity> & { devices?: number })[];
}

/** The running link. */
export interface KubeletLink {
  /**
   * Pools whose `vpcni.io/<pool>` devices the pod holds (empty: none); undefined when the
   * kubelet could not be asked in time (logged).
   */
  /**
   * The pools whose devices the pod holds (empty: none). Rejects when the kubelet does not
   * answer in time: the ADD is then answered "try again", never with a guessed pool.
   */
  poolsOfPod(namespace: string, name: string): Promise<string[] | undefined>;
  /** Registration and each pool's advertised capacity. */
  view(): PoolCapacityView;
  stop(): Promise<void>;
}

/** The device-plugin knobs of the configuration. */
export interface DevicePluginKnobs {
  devicePlugin: "auto" | "on" | "off";
  devicePluginDir: string;
  podResourcesSocket: string;
}

/** Starts the link when the knobs ask for it; undefined when it stays off. */
export async function startKubeletLinkIfEnabled(
  pools: PoolManager,
  k: DevicePluginKnobs,
): Promise<KubeletLink | undefined> {
  if (k.devicePlugin === "off") return undefined;
  if (k.devicePlugin === "auto") {
    const isDir = await Deno.stat(k.devicePluginDir).then((s) => s.isDirectory, () => false);
    if (!isDir) {
      log.info("no kubelet device-plugin directory {dir}: pool capacity is not advertised", {
        dir: k.devicePluginDir,
      });
      return undefined;
    }
  } else {
    await Deno.mkdir(k.devicePluginDir, { recursive: true });
  }
  const { startKubeletLink } = await import("./link.ts");
  return startKubeletLink(pools, {
    devicePluginDir: k.devicePluginDir,
    podResourcesSocket: k.podResourcesSocket,
    timeoutMs: POD_RESOURCES_TIMEOUT_MS,
  });
}
