/**
 * The plugin-facing API: `POST /v1/ipam` on a root-only unix socket, speaking
 * cni/ipam_protocol.ts. Requests are parsed with zod; every answer is HTTP 200 with an
 * {@linkcode IpamResponse} body, so the plugin forwards CNI codes unchanged.
 *
 * @module
 */
import { z } from "zod";
import {
  IPAM_PATH,
  IPAM_PROTOCOL_VERSION,
  type IpamErrorResponse,
  type IpamRequest,
  type IpamResponse,
} from "../cni/ipam_protocol.ts";
import { ErrorCode } from "../cni/errors.ts";
import { Ec2Error, Ec2FilterError } from "../aws/ec2_errors.ts";
import { ImdsError } from "../aws/imds.ts";
import { CheckpointWriteError, type PoolManager } from "./pools.ts";
import { attachmentKey } from "./node_state.ts";
import { log } from "./log.ts";
import { prepareSocket } from "./unix_socket.ts";

const key = {
  version: z.literal(IPAM_PROTOCOL_VERSION),
  network: z.string().min(1),
  containerId: z.string().min(1),
  ifName: z.string().min(1).max(15),
};

/** The request schema, mirroring cni/ipam_protocol.ts. */
export const ipamRequestSchema = z.discriminatedUnion("op", [
  z.object({
    ...key,
    op: z.literal("add"),
    netns: z.string(),
    podNamespace: z.string().optional(),
    podName: z.string().optional(),
    podUid: z.string().optional(),
    annotations: z.record(z.string(), z.string()).optional(),
  }),
  z.object({ ...key, op: z.literal("del") }),
  z.object({ ...key, op: z.literal("check") }),
  z.object({
    version: key.version,
    op: z.literal("gc"),
    network: z.string().min(1),
    validAttachments: z.array(z.object({ containerId: z.string(), ifName: z.string() })),
  }),
  z.object({
    version: key.version,
    op: z.literal("stale"),
    network: z.string().min(1),
    validAttachments: z.array(z.object({ containerId: z.string(), ifName: z.string() })),
  }),
  z.object({ version: key.version, op: z.literal("status"), pool: z.string().optional() }),
]);

/** Answers one parsed request. */
export async function handleIpamRequest(
  pools: PoolManager,
  req: IpamRequest,
): Promise<IpamResponse> {
  switch (req.op) {
    case "add":
      return await pools.add(req);
    case "del":
      return { ok: true, released: await pools.del(attachmentKey(req)) };
    case "check": {
      const a = pools.ctx.state.allocations.get(attachmentKey(req));
      if (!a) {
        return {
          ok: false,
          code: 3,
          msg: `no reservation for container ${req.containerId} interface ${req.ifName}`,
        };
      }
      return { ok: true, allocation: pools.podAllocation(a) };
    }
    case "gc":
      return { ok: true, released: await pools.gc(req.network, req.validAttachments) };
    case "stale":
      return { ok: true, stale: pools.stale(req.network, req.validAttachments) };
    case "status":
      return pools.status(req.pool);
  }
}

/** Parses a raw body and answers it; malformed requests get code 6 or 1. */
export async function answerRaw(pools: PoolManager, body: string): Promise<IpamResponse> {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (e) {
    return { ok: false, code: 6, msg: `request is not JSON: ${(e as Error).message}` };
  }
  if (raw && typeof raw === "object" && "version" in raw && raw.version !== IPAM_PROTOCOL_VERSION) {
    return {
      ok: false,
      code: 1,
      msg: `IPAM protocol version ${String(raw.version)} is not spoken; this daemon speaks ` +
        `${IPAM_PROTOCOL_VERSION}`,
    };
  }
  const r = ipamRequestSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    return {
      ok: false,
      code: 6,
      msg: `bad IPAM request: ${i.path.join(".") || "(body)"}: ${i.message}`,
    };
  }
  try {
    return await handleIpamRequest(pools, r.data as IpamRequest);
  } catch (e) {
    return failureAnswer(r.data.op, e);
  }
}

/**
 * The answer to a request that threw. EC2 or IMDS failing is transient (11: the runtime
 * retries); a checkpoint that cannot be written is an I/O failure (5); anything else is a bug
 * in the daemon (999, with its message): retrying cannot help, so 11 would make the runtime
 * retry for ever. The stack goes to the daemon's log, never into the answer.
 */
export function failureAnswer(op: string, e: unknown): IpamErrorResponse {
  const message = e instanceof Error ? e.message : String(e);
  if (e instanceof CheckpointWriteError) {
    log.error("request {op}: {error}", { op, error: message });
    return { ok: false, code: ErrorCode.IO_FAILURE, msg: message };
  }
  if ((e instanceof Ec2Error && !(e instanceof Ec2FilterError)) || e instanceof ImdsError) {
    log.warn("request {op} failed on AWS: {error}", { op, error: message });
    return { ok: false, code: ErrorCode.TRY_AGAIN_LATER, msg: `${op}: ${message}` };
  }
  log.error("request {op} failed on a daemon bug: {error}", {
    op,
    error: message,
    stack: e instanceof Error ? e.stack : undefined,
  });
  return { ok: false, code: ErrorCode.INTERNAL, msg: `daemon bug during ${op}: ${message}` };
}

/**
 * Serves the API on a unix socket, mode 0600 from its creation (ipam/unix_socket.ts);
 * returns the server. Anything but a stale socket at `path` is refused, not replaced.
 */
export async function serveUnixApi(
  path: string,
  pools: PoolManager,
): Promise<Deno.HttpServer<Deno.UnixAddr>> {
  const place = await prepareSocket(path);
  const server = Deno.serve({ path: place.bindPath, onListen: () => {} }, async (request) => {
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname === IPAM_PATH) {
      const answer = await answerRaw(pools, await request.text());
      return Response.json(answer);
    }
    if (request.method === "GET" && url.pathname === "/healthz") return new Response("ok\n");
    return Response.json({
      ok: false,
      code: 6,
      msg: `no such endpoint ${request.method} ${url.pathname}`,
    }, {
      status: 404,
    });
  });
  await place.moveIntoPlace(() => server.shutdown());
  return server;
}
