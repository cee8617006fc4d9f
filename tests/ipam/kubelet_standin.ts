/**
 * A stand-in for the kubelet's two gRPC sides, for tests that run where no kubelet does:
 * the device-plugin registration socket (it dials each registered plugin back, as the
 * kubelet does, and follows its ListAndWatch stream) and a pod-resources socket answering
 * from a table the test sets. It speaks through the same grpc-js wrappers and codecs as the
 * daemon, so it proves the two ends agree with each other; tests against a real kubelet
 * (device_plugin_kubelet_test.ts) prove they agree with the kubelet.
 *
 * @module
 */
import { serveUnix, UnixGrpcClient, type UnixGrpcServer } from "../../ipam/kubelet/grpc.ts";
import { DEVICE_PLUGIN, POD_RESOURCES, REGISTRATION } from "../../ipam/kubelet/services.ts";
import type { Device, PodResources, RegisterRequest } from "../../ipam/kubelet/messages.ts";

/** One plugin registration the stand-in accepted, and what its stream has sent since. */
export interface Registered {
  request: RegisterRequest;
  /** Every device list received on ListAndWatch, in order. */
  lists: Device[][];
  client: UnixGrpcClient;
}

/** The stand-in kubelet. */
export interface KubeletStandin {
  registrations: Registered[];
  /** The latest device list of a resource, from its latest registration. */
  devices(resource: string): Device[] | undefined;
  /** Pods pod-resources reports. */
  pods: PodResources[];
  /**
   * While true, pod-resources takes each call and never answers it (a kubelet whose API is
   * stuck; the caller's deadline ends the call).
   */
  podResourcesHangs: boolean;
  /** Stops both sockets, as a kubelet that exits does. */
  close(): Promise<void>;
}

/** Starts the stand-in on `<dir>/kubelet.sock` and `podResourcesSocket`. */
export async function startKubeletStandin(
  dir: string,
  podResourcesSocket: string,
): Promise<KubeletStandin> {
  const registrations: Registered[] = [];
  const aborts: AbortController[] = [];
  const st: KubeletStandin = {
    registrations,
    pods: [],
    podResourcesHangs: false,
    devices(resource) {
      return registrations.findLast((r) => r.request.resourceName === resource)?.lists.at(-1);
    },
    async close() {
      for (const a of aborts) a.abort();
      for (const r of registrations) r.client.close();
      for (const s of servers) s.close();
      await Deno.remove(`${dir}/kubelet.sock`).catch(() => {});
    },
  };
  const servers: UnixGrpcServer[] = [];
  servers.push(
    await serveUnix(`${dir}/kubelet.sock`, REGISTRATION, {
      Register: (
        call: { request: RegisterRequest },
        cb: (e: Error | null, r?: unknown) => void,
      ) => {
        const client = new UnixGrpcClient(`${dir}/${call.request.endpoint}`);
        const reg: Registered = { request: call.request, lists: [], client };
        registrations.push(reg);
        const abort = new AbortController();
        aborts.push(abort);
        // As the kubelet: answer first, then ask the plugin for its options and devices.
        cb(null, {});
        client.unary(DEVICE_PLUGIN.GetDevicePluginOptions, {}, 5000).then(() =>
          client.stream(DEVICE_PLUGIN.ListAndWatch, {}, (d) => reg.lists.push(d), abort.signal)
        ).catch(() => {});
      },
    }),
  );
  servers.push(
    await serveUnix(podResourcesSocket, POD_RESOURCES, {
      List: (_c: unknown, cb: (e: null, r: PodResources[]) => void) => {
        if (!st.podResourcesHangs) cb(null, st.pods);
      },
      Get: (
        call: { request: { namespace: string; name: string } },
        cb: (e: Error | null, r?: PodResources) => void,
      ) => {
        if (st.podResourcesHangs) return;
        const p = st.pods.find((x) =>
          x.namespace === call.request.namespace && x.name === call.request.name
        );
        // The kubelet answers an unknown pod with a plain error, no distinct code.
        p ? cb(null, p) : cb(new Error(`pod ${call.request.name} not found`));
      },
    }),
  );
  return st;
}

/** A pod-resources entry for a pod holding `ids` of `resource`. */
export function podWith(namespace: string, name: string, resource: string, ids: string[]) {
  return {
    namespace,
    name,
    containers: [{ name: "app", devices: [{ resourceName: resource, deviceIds: ids }] }],
  };
}
