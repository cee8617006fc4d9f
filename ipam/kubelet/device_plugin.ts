/**
 * The device plugin: one `DevicePlugin` gRPC server per pool, each on its own socket in the
 * kubelet's device-plugin directory (`vpcni-<pool>.sock`), registered with the kubelet as
 * resource `vpcni.io/<pool>`. ListAndWatch streams the pool's devices and sends a new list
 * whenever {@linkcode DevicePlugin.publish} changes it. When the kubelet restarts it deletes
 * every socket in the directory and makes its own `kubelet.sock` anew: the plugin notices
 * (a watch on the directory, and a check every second) and serves and registers again.
 *
 * @module
 */
import { grpcCode, type ServerWritableStream, serveUnix, UnixGrpcClient } from "./grpc.ts";
import type { UnixGrpcServer } from "./grpc.ts";
import { DEVICE_PLUGIN, REGISTRATION } from "./services.ts";
import { type Device, DEVICE_PLUGIN_API_VERSION, HEALTHY } from "./messages.ts";
import { resourceName } from "./pod_resources.ts";
import { log } from "../log.ts";
import { KUBELET_SOCKET, kubeletAnswers, kubeletSocketPath } from "./kubelet_socket.ts";

export { KUBELET_SOCKET };

/** The socket file name of a pool's endpoint. */
export function endpointName(pool: string): string {
  return `vpcni-${pool}.sock`;
}

const REGISTER_TIMEOUT_MS = 5_000;
const CHECK_EVERY_MS = 1_000;

interface PoolEndpoint {
  pool: string;
  server?: UnixGrpcServer;
  streams: Set<ServerWritableStream<unknown, Device[]>>;
  ids: string[];
}

/** The state of the registration, for introspection. */
export interface RegistrationView {
  /**
   * True once the kubelet accepted every pool's registration (and since its last restart),
   * while it still answers on its socket (looked at every second).
   */
  registered: boolean;
  /** Registrations made since start (the first, plus one per kubelet restart). */
  registrations: number;
  /** ListAndWatch streams the kubelet holds open now. */
  streams: number;
  /** The last registration error, if the last attempt failed. */
  lastError?: string;
}

/** Serves every pool's devices to the kubelet. */
export class DevicePlugin {
  readonly #endpoints = new Map<string, PoolEndpoint>();
  #kubeletIno?: number;
  #registered = false;
  #registrations = 0;
  #lastError?: string;
  #stopping = false;
  #timer?: ReturnType<typeof setInterval>;
  #watcher?: Deno.FsWatcher;
  #busy?: Promise<void>;

  /** A plugin for `pools` in the device-plugin directory `dir`. */
  constructor(readonly dir: string, pools: string[]) {
    for (const pool of pools) this.#endpoints.set(pool, { pool, streams: new Set(), ids: [] });
  }

  /** Starts serving and registering; returns at once (the kubelet may come later). */
  start(): void {
    this.#check();
    this.#timer = setInterval(() => this.#check(), CHECK_EVERY_MS);
    try {
      this.#watcher = Deno.watchFs(this.dir, { recursive: false });
      (async () => {
        for await (const ev of this.#watcher!) {
          if (ev.paths.some((p) => p.endsWith(`/${KUBELET_SOCKET}`))) this.#check();
        }
      })().catch(() => {});
    } catch (e) {
      log.warn("cannot watch {dir} ({error}); checking it every second", {
        dir: this.dir,
        error: String(e),
      });
    }
  }

  /** Sets a pool's devices; streams get the new list when it differs from the last one. */
  publish(pool: string, ids: string[]): void {
    const ep = this.#endpoints.get(pool);
    if (!ep) return;
    if (ep.ids.length === ids.length && ep.ids.every((id, i) => id === ids[i])) return;
    ep.ids = ids;
    for (const s of ep.streams) {
      try {
        s.write(devices(ids));
      } catch {
        ep.streams.delete(s); // the kubelet went away mid-write; it gets the list on reconnect
      }
    }
  }

  /** What introspection shows. */
  view(): RegistrationView {
    let streams = 0;
    for (const ep of this.#endpoints.values()) streams += ep.streams.size;
    return {
      registered: this.#registered,
      registrations: this.#registrations,
      streams,
      ...(this.#lastError ? { lastError: this.#lastError } : {}),
    };
  }

  /** Stops serving and removes the endpoint sockets. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#timer);
    this.#watcher?.close();
    await this.#busy?.catch(() => {});
    for (const ep of this.#endpoints.values()) await this.#unserve(ep);
  }

  /** Serves and registers again when the kubelet's socket is new or ours are gone. */
  #check(): void {
    if (this.#busy || this.#stopping) return;
    this.#busy = this.#reconcile().finally(() => this.#busy = undefined);
  }

  async #reconcile(): Promise<void> {
    const socket = kubeletSocketPath(this.dir);
    const ino = await inode(socket);
    // A socket file a kubelet that is gone left behind is no kubelet: nothing is served or
    // registered there, and a registration made with it no longer counts.
    if (ino === undefined || !(await kubeletAnswers(socket))) {
      const why = ino === undefined
        ? `no kubelet socket ${socket}`
        : `no kubelet answers on ${socket}`;
      if (this.#registered) log.warn("the kubelet went away: {why}", { why });
      this.#registered = false;
      this.#kubeletIno = undefined;
      this.#lastError = why;
      return;
    }
    let missing = false;
    for (const ep of this.#endpoints.values()) {
      if (!ep.server || (await inode(`${this.dir}/${endpointName(ep.pool)}`)) === undefined) {
        missing = true;
      }
    }
    if (this.#registered && ino === this.#kubeletIno && !missing) return;
    try {
      for (const ep of this.#endpoints.values()) {
        await this.#unserve(ep);
        await this.#serve(ep);
      }
      if (this.#stopping) return;
      const client = new UnixGrpcClient(`${this.dir}/${KUBELET_SOCKET}`);
      try {
        for (const ep of this.#endpoints.values()) {
          await client.unary(REGISTRATION.Register, {
            version: DEVICE_PLUGIN_API_VERSION,
            endpoint: endpointName(ep.pool),
            resourceName: resourceName(ep.pool),
            options: { preStartRequired: false, getPreferredAllocationAvailable: false },
          }, REGISTER_TIMEOUT_MS);
        }
      } finally {
        client.close();
      }
      this.#registered = true;
      this.#kubeletIno = ino;
      this.#registrations++;
      this.#lastError = undefined;
      log.info("registered {resources} with the kubelet", {
        resources: [...this.#endpoints.keys()].map(resourceName).join(", "),
        registrations: this.#registrations,
      });
    } catch (e) {
      this.#registered = false;
      const error = `${grpcCode(e) ?? ""} ${(e as Error).message}`.trim();
      if (error !== this.#lastError) {
        log.warn("registration with the kubelet failed, retrying: {error}", { error });
      }
      this.#lastError = error;
    }
  }

  async #serve(ep: PoolEndpoint): Promise<void> {
    ep.server = await serveUnix(`${this.dir}/${endpointName(ep.pool)}`, DEVICE_PLUGIN, {
      GetDevicePluginOptions: (_call: unknown, cb: (e: null, r: unknown) => void) =>
        cb(null, { preStartRequired: false, getPreferredAllocationAvailable: false }),
      ListAndWatch: (call: ServerWritableStream<unknown, Device[]>) => {
        ep.streams.add(call);
        call.write(devices(ep.ids));
        const drop = () => ep.streams.delete(call);
        call.on("cancelled", drop);
        call.on("close", drop);
        call.on("error", drop);
      },
      Allocate: (call: { request: string[][] }, cb: (e: null, r: number) => void) =>
        cb(null, call.request.length),
    });
  }

  async #unserve(ep: PoolEndpoint): Promise<void> {
    for (const s of ep.streams) s.end();
    ep.streams.clear();
    ep.server?.close();
    ep.server = undefined;
    await Deno.remove(`${this.dir}/${endpointName(ep.pool)}`).catch(() => {});
  }
}

function devices(ids: string[]): Device[] {
  return ids.map((id) => ({ id, health: HEALTHY }));
}

async function inode(path: string): Promise<number | undefined> {
  try {
    return (await Deno.stat(path)).ino ?? 0;
  } catch {
    return undefined;
  }
}
