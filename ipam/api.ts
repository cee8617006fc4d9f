/**
 * The plugin-facing API: `POST /v1/ipam` on a root-only unix socket, speaking proto/ipam.ts
 * and parsing requests with its validator (the same one the plugin's side uses). Every answer
 * is HTTP 200 with an {@linkcode IpamResponse} body, so the plugin forwards CNI codes
 * unchanged. A `cni` request (a whole invocation of the main plugin) goes to the CNI service
 * (ipam/cni_service.ts), which runs the plugin's verbs on workers of its own.
 *
 * @module
 */
import {
  IPAM_PATH,
  type IpamErrorResponse,
  type IpamRequest,
  type IpamResponse,
  MAX_REQUEST_BYTES,
  REQUEST_ERROR,
} from "../proto/ipam.ts";
import { parseIpamRequest } from "../proto/ipam_validate.ts";
import { ErrorCode } from "../proto/errors.ts";
import { Ec2Error, Ec2FilterError } from "../aws/ec2_errors.ts";
import { ImdsError } from "../aws/imds.ts";
import type { PoolManager } from "./pools.ts";
import { CheckpointWriteError } from "./allocator.ts";
import { attachmentKey } from "./node_state.ts";
import { log } from "./log.ts";
import { prepareSocket } from "./unix_socket.ts";
import { CniService } from "./cni_service.ts";
import { serveNetnsFdsFor } from "./netns_fds.ts";

/** Answers one parsed request. */
export async function handleIpamRequest(
  pools: PoolManager,
  req: IpamRequest,
  cni?: CniService,
): Promise<IpamResponse> {
  switch (req.op) {
    case "cni":
      if (!cni) return { ok: false, code: 11, msg: "this daemon runs no CNI service" };
      return await cni.run(req);
    case "add":
      return await pools.add(req);
    case "del":
      return { ok: true, released: await pools.del(attachmentKey(req)) };
    case "check": {
      const allocation = pools.check(attachmentKey(req));
      if (!allocation) {
        return {
          ok: false,
          code: 3,
          msg: `no reservation for container ${req.containerId} interface ${req.ifName}`,
        };
      }
      return { ok: true, allocation };
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
export async function answerRaw(
  pools: PoolManager,
  body: string,
  cni?: CniService,
): Promise<IpamResponse> {
  const req = parseIpamRequest(body);
  if ("ok" in req) return req;
  try {
    return await handleIpamRequest(pools, req, cni);
  } catch (e) {
    const answer = failureAnswer(req.op, e);
    // A refusal of an invocation says its protocol, so the thin plugin passes it on.
    return req.op === "cni" ? { ...answer, version: req.version } : answer;
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
  cni: CniService = new CniService((body) => answerRaw(pools, body)),
): Promise<Deno.HttpServer<Deno.UnixAddr>> {
  const place = await prepareSocket(path);
  const server = Deno.serve({ path: place.bindPath, onListen: () => {} }, async (request) => {
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname === IPAM_PATH) {
      const size = Number(request.headers.get("content-length") ?? "0");
      if (size > MAX_REQUEST_BYTES) {
        return Response.json({
          ok: false,
          code: REQUEST_ERROR.MALFORMED,
          msg: `request of ${size} bytes is over the bound of ${MAX_REQUEST_BYTES}`,
        });
      }
      const answer = await answerRaw(pools, await request.text(), cni);
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
  const netnsFds = await serveNetnsFdsFor(path, cni);
  server.finished.then(async () => {
    cni.close();
    await netnsFds?.close();
  });
  return server;
}
