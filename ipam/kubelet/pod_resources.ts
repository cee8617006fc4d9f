/**
 * The kubelet's pod-resources API, as the daemon asks it: which `vpcni.io/<pool>` devices a
 * pod holds (`Get`, or `List` where the kubelet does not offer `Get`), and which devices of
 * each pool all running pods hold. Every call is bounded: the kubelet must not hold up an ADD.
 *
 * @module
 */
import { grpcCode, GrpcStatus, UnixGrpcClient } from "./grpc.ts";
import type { PodResources } from "./messages.ts";
import { POD_RESOURCES } from "./services.ts";

/** Prefix of the extended resources vpcni advertises: `vpcni.io/<pool>`. */
export const RESOURCE_PREFIX = "vpcni.io/";

/** The resource name of a pool. */
export function resourceName(pool: string): string {
  return `${RESOURCE_PREFIX}${pool}`;
}

/** Pools whose devices a pod holds, from its pod-resources entry (sorted, unique). */
export function podPools(p: PodResources | undefined): string[] {
  const out = new Set<string>();
  for (const c of p?.containers ?? []) {
    for (const d of c.devices) {
      if (d.resourceName.startsWith(RESOURCE_PREFIX) && d.deviceIds.length > 0) {
        out.add(d.resourceName.slice(RESOURCE_PREFIX.length));
      }
    }
  }
  return [...out].sort();
}

/** Devices of our resources held by running pods: pool → pod key (`ns/name`) → device ids. */
export type HeldDevices = Map<string, Map<string, string[]>>;

/** Groups a `List` answer by pool and pod. */
export function heldDevices(pods: readonly PodResources[]): HeldDevices {
  const out: HeldDevices = new Map();
  for (const p of pods) {
    for (const c of p.containers) {
      for (const d of c.devices) {
        if (!d.resourceName.startsWith(RESOURCE_PREFIX)) continue;
        const pool = d.resourceName.slice(RESOURCE_PREFIX.length);
        const byPod = out.get(pool) ?? new Map<string, string[]>();
        out.set(pool, byPod);
        const key = `${p.namespace}/${p.name}`;
        byPod.set(key, [...(byPod.get(key) ?? []), ...d.deviceIds]);
      }
    }
  }
  return out;
}

/** A client of the kubelet's pod-resources socket. */
export class PodResourcesClient {
  readonly #client: UnixGrpcClient;
  #getMissing = false;

  /** A client of the socket at `path`; every call gives up after `timeoutMs`. */
  constructor(readonly path: string, readonly timeoutMs: number) {
    this.#client = new UnixGrpcClient(path);
  }

  /** Every running pod with the devices it holds. */
  list(): Promise<PodResources[]> {
    return this.#client.unary(POD_RESOURCES.List, {}, this.timeoutMs);
  }

  /**
   * The pools whose devices the pod holds. `Get` where the kubelet has it, else `List`. A
   * pod the kubelet does not know holds nothing. Throws when the kubelet cannot be asked.
   */
  async podPools(namespace: string, name: string): Promise<string[]> {
    if (!this.#getMissing) {
      try {
        return podPools(
          await this.#client.unary(POD_RESOURCES.Get, { namespace, name }, this.timeoutMs),
        );
      } catch (e) {
        const code = grpcCode(e);
        // Unreachable or too slow: asking again with List would only double the wait.
        if (code === GrpcStatus.UNAVAILABLE || code === GrpcStatus.DEADLINE_EXCEEDED) throw e;
        // A kubelet without the Get call (feature gate off) says Unimplemented: use List.
        if (code === GrpcStatus.UNIMPLEMENTED) this.#getMissing = true;
        // A pod the kubelet does not know is an error without a distinct code: List tells.
      }
    }
    const pods = await this.list();
    return podPools(pods.find((p) => p.namespace === namespace && p.name === name));
  }

  /** Closes the connection. */
  close(): void {
    this.#client.close();
  }
}
