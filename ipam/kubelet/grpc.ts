/**
 * gRPC over unix sockets with `@grpc/grpc-js` (the only module that imports it): the three
 * kubelet services as grpc-js service definitions over vpcni's own message codecs, a server
 * bound to a socket path and a client of one. The daemon loads this module only when the
 * device plugin is on; the CNI plugin never does.
 *
 * @module
 */
import * as grpc from "@grpc/grpc-js";
import { Buffer } from "node:buffer";

/** A gRPC status code, as grpc-js names them. */
export const GrpcStatus = grpc.status;

/** One method: its full path and the codecs of its request and response. */
interface MethodSpec<Req, Res> {
  path: string;
  encodeRequest: (r: Req) => Uint8Array;
  decodeRequest: (b: Uint8Array) => Req;
  encodeResponse: (r: Res) => Uint8Array;
  decodeResponse: (b: Uint8Array) => Res;
  responseStream?: boolean;
}

const asBuffer = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/** A grpc-js method definition from a spec. */
export function method<Req, Res>(m: MethodSpec<Req, Res>): grpc.MethodDefinition<Req, Res> {
  return {
    path: m.path,
    requestStream: false,
    responseStream: m.responseStream ?? false,
    requestSerialize: (r: Req) => asBuffer(m.encodeRequest(r)),
    requestDeserialize: (b: Buffer) => m.decodeRequest(b),
    responseSerialize: (r: Res) => asBuffer(m.encodeResponse(r)),
    responseDeserialize: (b: Buffer) => m.decodeResponse(b),
  };
}

/** A running gRPC server on a unix socket. */
export interface UnixGrpcServer {
  /** Stops at once: open calls (a ListAndWatch stream) are cancelled. */
  close(): void;
}

/** Serves `service` with `impl` on the unix socket `path` (replacing a stale file). */
export async function serveUnix(
  path: string,
  service: grpc.ServiceDefinition,
  impl: grpc.UntypedServiceImplementation,
): Promise<UnixGrpcServer> {
  await Deno.remove(path).catch(() => {});
  const server = new grpc.Server();
  server.addService(service, impl);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(
      `unix://${path}`,
      grpc.ServerCredentials.createInsecure(),
      (e) => e ? reject(e) : resolve(),
    )
  );
  return { close: () => server.forceShutdown() };
}

/** A client of one service on a unix socket. */
export class UnixGrpcClient {
  readonly #client: grpc.Client;

  /** Connects lazily to the unix socket `path`. */
  constructor(readonly path: string) {
    this.#client = new grpc.Client(`unix://${path}`, grpc.credentials.createInsecure(), {
      // The kubelet's sockets vanish and come back when it restarts; the default backoff
      // (up to 2 minutes) would keep a daemon's calls failing long after it is back.
      "grpc.initial_reconnect_backoff_ms": 200,
      "grpc.max_reconnect_backoff_ms": 1000,
    });
  }

  /** A unary call; fails when no answer came within `timeoutMs` (connecting included). */
  unary<Req, Res>(m: grpc.MethodDefinition<Req, Res>, req: Req, timeoutMs: number): Promise<Res> {
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(
        m.path,
        m.requestSerialize,
        m.responseDeserialize,
        req,
        // Wait for the connection up to the deadline: a socket that is just coming back (the
        // kubelet restarting) fails a call at once otherwise, during the reconnect backoff.
        new grpc.Metadata({ waitForReady: true }),
        { deadline: Date.now() + timeoutMs },
        (e, res) => e ? reject(e) : resolve(res!),
      );
    });
  }

  /** A server-streaming call; `onMessage` sees each message; resolves when the stream ends. */
  stream<Req, Res>(
    m: grpc.MethodDefinition<Req, Res>,
    req: Req,
    onMessage: (r: Res) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    const call = this.#client.makeServerStreamRequest(
      m.path,
      m.requestSerialize,
      m.responseDeserialize,
      req,
    );
    signal?.addEventListener("abort", () => call.cancel());
    return new Promise((resolve, reject) => {
      call.on("data", onMessage);
      call.on("end", () => resolve());
      call.on(
        "error",
        (e: grpc.ServiceError) => e.code === grpc.status.CANCELLED ? resolve() : reject(e),
      );
    });
  }

  /** Closes the channel. */
  close(): void {
    this.#client.close();
  }
}

/** The gRPC status code of an error from a call, if it has one. */
export function grpcCode(e: unknown): number | undefined {
  const c = (e as { code?: unknown })?.code;
  return typeof c === "number" ? c : undefined;
}

export type { ServerUnaryCall, ServerWritableStream, ServiceDefinition } from "@grpc/grpc-js";
