/**
 * The kubelet's gRPC services that vpcni uses, as grpc-js service definitions: the
 * device-plugin `Registration` (served by the kubelet) and `DevicePlugin` (served by
 * vpcni, one per pool), and the pod-resources `PodResourcesLister` (served by the kubelet).
 *
 * @module
 */
import { method } from "./grpc.ts";
import * as msg from "./messages.ts";

const empty = {
  encode: (_: unknown) => msg.encodeEmpty(),
  decode: (_: Uint8Array) => ({}),
};

/** `v1beta1.Registration`. */
export const REGISTRATION = {
  Register: method<msg.RegisterRequest, Record<never, never>>({
    path: "/v1beta1.Registration/Register",
    encodeRequest: msg.encodeRegisterRequest,
    decodeRequest: msg.decodeRegisterRequest,
    encodeResponse: empty.encode,
    decodeResponse: empty.decode,
  }),
};

/** `v1beta1.DevicePlugin` (the calls vpcni answers; the optional two are not offered). */
export const DEVICE_PLUGIN = {
  GetDevicePluginOptions: method<Record<never, never>, msg.DevicePluginOptions>({
    path: "/v1beta1.DevicePlugin/GetDevicePluginOptions",
    encodeRequest: empty.encode,
    decodeRequest: empty.decode,
    encodeResponse: msg.encodeOptions,
    decodeResponse: msg.decodeOptions,
  }),
  ListAndWatch: method<Record<never, never>, msg.Device[]>({
    path: "/v1beta1.DevicePlugin/ListAndWatch",
    encodeRequest: empty.encode,
    decodeRequest: empty.decode,
    encodeResponse: msg.encodeDeviceList,
    decodeResponse: msg.decodeDeviceList,
    responseStream: true,
  }),
  Allocate: method<string[][], number>({
    path: "/v1beta1.DevicePlugin/Allocate",
    encodeRequest: msg.encodeAllocateRequest,
    decodeRequest: msg.decodeAllocateRequest,
    encodeResponse: msg.encodeAllocateResponse,
    decodeResponse: msg.decodeAllocateResponse,
  }),
};

/** `v1.PodResourcesLister`. */
export const POD_RESOURCES = {
  List: method<Record<never, never>, msg.PodResources[]>({
    path: "/v1.PodResourcesLister/List",
    encodeRequest: empty.encode,
    decodeRequest: empty.decode,
    encodeResponse: msg.encodeListPodsResponse,
    decodeResponse: msg.decodeListPodsResponse,
  }),
  Get: method<{ namespace: string; name: string }, msg.PodResources | undefined>({
    path: "/v1.PodResourcesLister/Get",
    encodeRequest: (r) => msg.encodeGetPodRequest(r.namespace, r.name),
    decodeRequest: msg.decodeGetPodRequest,
    encodeResponse: (p) => p ? msg.encodeGetPodResponse(p) : new Uint8Array(0),
    decodeResponse: msg.decodeGetPodResponse,
  }),
  GetAllocatableResources: method<
    Record<never, never>,
    ReturnType<typeof msg.decodeAllocatable>
  >({
    path: "/v1.PodResourcesLister/GetAllocatableResources",
    encodeRequest: empty.encode,
    decodeRequest: empty.decode,
    encodeResponse: (r) => msg.encodeAllocatable(r.devices),
    decodeResponse: msg.decodeAllocatable,
  }),
};
