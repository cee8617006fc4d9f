/**
 * The kubelet messages vpcni speaks, with their field numbers from the kubelet's
 * device-plugin API (`v1beta1`) and pod-resources API (`v1`). Each has an encoder and a
 * decoder: the daemon encodes what it sends and decodes what it receives; the other
 * direction serves tests, which play the kubelet's side when no kubelet runs.
 *
 * @module
 */
import { MessageWriter, nested, num, nums, readFields, text } from "./wire.ts";

/** The device-plugin API version the daemon registers with. */
export const DEVICE_PLUGIN_API_VERSION = "v1beta1";
/** Health of a device that can be allocated. */
export const HEALTHY = "Healthy";

/** `DevicePluginOptions`: which optional calls the plugin wants. */
export interface DevicePluginOptions {
  preStartRequired: boolean;
  getPreferredAllocationAvailable: boolean;
}

/** `RegisterRequest`: a plugin announcing one resource and its endpoint socket. */
export interface RegisterRequest {
  version: string;
  /** The endpoint socket's file name, relative to the device-plugin directory. */
  endpoint: string;
  resourceName: string;
  options?: DevicePluginOptions;
}

/** `Device`: one allocatable unit of a resource. */
export interface Device {
  id: string;
  health: string;
}

/** `ContainerDevices`: devices of one resource (in pod-resources answers). */
export interface ContainerDevices {
  resourceName: string;
  deviceIds: string[];
}

/** `ContainerResources`: what one container of a pod holds. */
export interface ContainerResources {
  name: string;
  devices: ContainerDevices[];
}

/** `PodResources`: what one pod holds. */
export interface PodResources {
  name: string;
  namespace: string;
  containers: ContainerResources[];
}

/** Encodes `Empty`. */
export function encodeEmpty(): Uint8Array {
  return new Uint8Array(0);
}

/** Encodes `DevicePluginOptions`. */
export function encodeOptions(o: DevicePluginOptions): Uint8Array {
  return new MessageWriter().bool(1, o.preStartRequired)
    .bool(2, o.getPreferredAllocationAvailable).finish();
}

/** Decodes `DevicePluginOptions`. */
export function decodeOptions(b: Uint8Array): DevicePluginOptions {
  const o = { preStartRequired: false, getPreferredAllocationAvailable: false };
  for (const f of readFields(b)) {
    if (f.field === 1) o.preStartRequired = num(f) !== 0;
    if (f.field === 2) o.getPreferredAllocationAvailable = num(f) !== 0;
  }
  return o;
}

/** Encodes `RegisterRequest`. */
export function encodeRegisterRequest(r: RegisterRequest): Uint8Array {
  const w = new MessageWriter().string(1, r.version).string(2, r.endpoint)
    .string(3, r.resourceName);
  if (r.options) w.message(4, encodeOptions(r.options));
  return w.finish();
}

/** Decodes `RegisterRequest`. */
export function decodeRegisterRequest(b: Uint8Array): RegisterRequest {
  const r: RegisterRequest = { version: "", endpoint: "", resourceName: "" };
  for (const f of readFields(b)) {
    if (f.field === 1) r.version = text(f);
    else if (f.field === 2) r.endpoint = text(f);
    else if (f.field === 3) r.resourceName = text(f);
    else if (f.field === 4) r.options = decodeOptions(nested(f));
  }
  return r;
}

/** Encodes `ListAndWatchResponse`. */
export function encodeDeviceList(devices: readonly Device[]): Uint8Array {
  const w = new MessageWriter();
  for (const d of devices) {
    w.message(1, new MessageWriter().string(1, d.id).string(2, d.health).finish());
  }
  return w.finish();
}

/** Decodes `ListAndWatchResponse`. */
export function decodeDeviceList(b: Uint8Array): Device[] {
  const out: Device[] = [];
  for (const f of readFields(b)) {
    if (f.field !== 1) continue;
    const d: Device = { id: "", health: "" };
    for (const g of readFields(nested(f))) {
      if (g.field === 1) d.id = text(g);
      if (g.field === 2) d.health = text(g);
    }
    out.push(d);
  }
  return out;
}

/** Encodes `AllocateRequest`: device ids asked for, per container. */
export function encodeAllocateRequest(containers: readonly string[][]): Uint8Array {
  const w = new MessageWriter();
  for (const ids of containers) w.message(1, new MessageWriter().strings(1, ids).finish());
  return w.finish();
}

/** Decodes `AllocateRequest` into the device ids asked for, per container. */
export function decodeAllocateRequest(b: Uint8Array): string[][] {
  return readFields(b).filter((f) => f.field === 1).map((f) =>
    readFields(nested(f)).filter((g) => g.field === 1).map(text)
  );
}

/**
 * Encodes `AllocateResponse` with one empty `ContainerAllocateResponse` per container: an
 * address needs no device node, mount or variable in the container.
 */
export function encodeAllocateResponse(containers: number): Uint8Array {
  const w = new MessageWriter();
  for (let i = 0; i < containers; i++) w.message(1, new Uint8Array(0));
  return w.finish();
}

/** Counts the container answers of an `AllocateResponse`. */
export function decodeAllocateResponse(b: Uint8Array): number {
  return readFields(b).filter((f) => f.field === 1).length;
}

/** Encodes `GetPodResourcesRequest`. */
export function encodeGetPodRequest(namespace: string, name: string): Uint8Array {
  return new MessageWriter().string(1, name).string(2, namespace).finish();
}

/** Decodes `GetPodResourcesRequest`. */
export function decodeGetPodRequest(b: Uint8Array): { namespace: string; name: string } {
  const r = { namespace: "", name: "" };
  for (const f of readFields(b)) {
    if (f.field === 1) r.name = text(f);
    if (f.field === 2) r.namespace = text(f);
  }
  return r;
}

function encodeContainerDevices(d: ContainerDevices): Uint8Array {
  return new MessageWriter().string(1, d.resourceName).strings(2, d.deviceIds).finish();
}

function decodeContainerDevices(b: Uint8Array): ContainerDevices {
  const d: ContainerDevices = { resourceName: "", deviceIds: [] };
  for (const f of readFields(b)) {
    if (f.field === 1) d.resourceName = text(f);
    if (f.field === 2) d.deviceIds.push(text(f));
  }
  return d;
}

/** Encodes `PodResources` (devices only). */
export function encodePodResources(p: PodResources): Uint8Array {
  const w = new MessageWriter().string(1, p.name).string(2, p.namespace);
  for (const c of p.containers) {
    const cw = new MessageWriter().string(1, c.name);
    for (const d of c.devices) cw.message(2, encodeContainerDevices(d));
    w.message(3, cw.finish());
  }
  return w.finish();
}

/** Decodes `PodResources`, keeping names and devices (CPUs, memory, DRA claims skipped). */
export function decodePodResources(b: Uint8Array): PodResources {
  const p: PodResources = { name: "", namespace: "", containers: [] };
  for (const f of readFields(b)) {
    if (f.field === 1) p.name = text(f);
    else if (f.field === 2) p.namespace = text(f);
    else if (f.field === 3) {
      const c: ContainerResources = { name: "", devices: [] };
      for (const g of readFields(nested(f))) {
        if (g.field === 1) c.name = text(g);
        if (g.field === 2) c.devices.push(decodeContainerDevices(nested(g)));
      }
      p.containers.push(c);
    }
  }
  return p;
}

/** Encodes `GetPodResourcesResponse`. */
export function encodeGetPodResponse(p: PodResources): Uint8Array {
  return new MessageWriter().message(1, encodePodResources(p)).finish();
}

/** Decodes `GetPodResourcesResponse`; undefined when it names no pod. */
export function decodeGetPodResponse(b: Uint8Array): PodResources | undefined {
  const f = readFields(b).find((x) => x.field === 1);
  return f ? decodePodResources(nested(f)) : undefined;
}

/** Encodes `ListPodResourcesResponse`. */
export function encodeListPodsResponse(pods: readonly PodResources[]): Uint8Array {
  const w = new MessageWriter();
  for (const p of pods) w.message(1, encodePodResources(p));
  return w.finish();
}

/** Decodes `ListPodResourcesResponse`. */
export function decodeListPodsResponse(b: Uint8Array): PodResources[] {
  return readFields(b).filter((f) => f.field === 1).map((f) => decodePodResources(nested(f)));
}

/** Encodes `AllocatableResourcesResponse` (devices only). */
export function encodeAllocatable(devices: readonly ContainerDevices[]): Uint8Array {
  const w = new MessageWriter();
  for (const d of devices) w.message(1, encodeContainerDevices(d));
  return w.finish();
}

/** Decodes `AllocatableResourcesResponse`: the healthy devices of every resource. */
export function decodeAllocatable(
  b: Uint8Array,
): { devices: ContainerDevices[]; cpuIds: number[] } {
  const out = { devices: [] as ContainerDevices[], cpuIds: [] as number[] };
  for (const f of readFields(b)) {
    if (f.field === 1) out.devices.push(decodeContainerDevices(nested(f)));
    if (f.field === 2) out.cpuIds.push(...nums(f));
  }
  return out;
}
