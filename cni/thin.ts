/**
 * The plugin as the runtime execs it: a thin client. For the `vpcni` main plugin with the
 * daemon, and for vpcni as the IPAM plugin under another main plugin, it reads the CNI
 * variables and stdin, sends them to the daemon in one round trip over its 0600 unix socket
 * (proto/ipam.ts, request `cni`), and prints the daemon's answer — the result or the spec's
 * error JSON, in the request's cniVersion — with its exit code. The daemon checks the request
 * exactly as the plugin does (cni/plugin.ts runs there, ipam/cni_service.ts) before it touches
 * anything.
 *
 * This module loads no FFI, no netlink and no npm: a process per pod pays for what it loads.
 * The whole plugin (cni/plugin.ts) is loaded, through `loadFull`, only when:
 * - addresses come from a delegated IPAM plugin (`ipam.type` other than `vpcni` under
 *   `type: vpcni`): that plugin runs from the node's `CNI_PATH`, so the invocation stays here;
 * - the request is one the daemon need not see: VERSION, stdin that is not JSON or over the
 *   bound, a `CNI_COMMAND` that is no verb, a `daemonSocket` or `daemonTimeoutMs` the plugin
 *   would refuse — the full plugin answers these with its own errors;
 * - the daemon is down (no socket, nobody listening): the full plugin checks the request
 *   and answers ADD and CHECK with code 11 and STATUS with 50, naming the socket (or with the
 *   request's own error, which comes first); a DEL removes the pod's host objects here and
 *   succeeds, leaving a record the daemon releases the address by before it serves again
 *   (proto/del_records.ts);
 * - the daemon answers the invocation but not in protocol 2 — an older release that only
 *   reserves (rolling upgrade), or a socket that is not vpcni's daemon at all: the full plugin
 *   speaks protocol 1 with it, as that release's plugin did, and judges its answers as that
 *   protocol says. A version skew thus costs time, never a wrong result;
 * - the daemon's mount namespace does not reach `CNI_NETNS` (a runtime that mounts pod netns
 *   under its own state dir, a daemon in a container without that directory): the daemon
 *   asks for the netns, and the full plugin opens it here, in the runtime's mount namespace,
 *   and hands it over on the daemon's netns socket (cni/netns_fd_send.ts); the invocation
 *   then goes again with the token it got. A daemon from before that hand-over refuses the
 *   path instead; when the full plugin sees a pod netns there, the error says what happened
 *   and how to fix it.
 *
 * @module
 */
import { httpPost, parseHttpResponse } from "./http_wire.ts";
import { CNI_VARS, readAllStdin, writeAllStdout } from "./process_io.ts";
import { CniError, ErrorCode, errorJson } from "./errors.ts";
import { isSupportedVersion, LATEST_CNI_VERSION } from "./versions.ts";
import {
  CNI_PROTOCOL_VERSION,
  DAEMON_ERROR_CODES,
  DEFAULT_ADD_TIMEOUT_MS,
  DEFAULT_DAEMON_TIMEOUT_MS,
  DEFAULT_IPAM_SOCKET,
  IPAM_PATH,
  MAX_DAEMON_ANSWER_BYTES,
  MAX_DAEMON_TIMEOUT_MS,
} from "../proto/ipam.ts";
import { concatBytes } from "../base/bytes.ts";
import { explainUnseenNetns, handOverNetns } from "./thin_netns.ts";

/** Where an invocation reads and writes (the full plugin's `PluginIo`). */
export interface ThinIo {
  getEnv(name: string): string | undefined;
  readStdin(limit: number): Uint8Array;
  writeStdout(text: string): void;
}

/** What the full plugin offers the thin one. */
export interface FullPlugin {
  runPlugin(io: ThinIo, opts?: { daemonDown?: boolean }): Promise<number>;
  /** True when `path` is a pod netns in the plugin's (the runtime's) mount namespace. */
  netnsIsHere(path: string): boolean;
  /** Hands `netns` to the daemon at `daemonSocket` (cni/netns_fd_send.ts). */
  sendNetnsFd(
    daemonSocket: string,
    netns: string,
    timeoutMs: number,
  ):
    | { token: string }
    | { gone: true }
    | { failed: { code: number; msg: string; details?: string } };
}

/** How the thin plugin runs. */
export interface ThinOptions {
  /** Loads the full plugin (cni/plugin.ts), only when the thin path cannot serve. */
  loadFull: () => Promise<FullPlugin>;
  io?: ThinIo;
}

/** stdin's bound (cni/bounds.ts), repeated here so the thin path loads nothing more. */
const STDIN_LIMIT = 1024 * 1024;
/** The socket path's bound: a unix socket address. */
const SOCKET_PATH_MAX = 107;

const VERBS = new Set(["ADD", "DEL", "CHECK", "GC", "STATUS"]);

/** The process's stdin, stdout and environment. */
export const thinProcessIo: ThinIo = {
  getEnv: (name) => Deno.env.get(name),
  readStdin: readAllStdin,
  writeStdout: writeAllStdout,
};

/** Where the daemon is, read from the configuration as the full plugin would. */
interface Route {
  socket: string;
  timeoutMs: number;
  cniVersion: string;
  /** A `logFile` is configured: nothing goes to stderr (the error JSON is on stdout). */
  quiet: boolean;
}

function field(o: unknown, k: string): unknown {
  return o !== null && typeof o === "object" && !Array.isArray(o)
    ? (o as Record<string, unknown>)[k]
    : undefined;
}

/**
 * The daemon to forward `verb` to, or undefined when the full plugin must serve this
 * configuration (a delegated IPAM plugin, or a daemon setting it would refuse with its own
 * message). The bound is the full plugin's (cni/config.ts `daemonSettings`): a configured
 * `daemonTimeoutMs`, else a longer one for ADD, which may wait for the pool to grow.
 */
function routeOf(raw: unknown, verb: string): Route | undefined {
  const type = field(raw, "type");
  const ipam = field(raw, "ipam");
  const ipamType = field(ipam, "type");
  const cniVersion = field(raw, "cniVersion");
  if (typeof cniVersion !== "string") return undefined;
  let socket: unknown, timeout: unknown;
  if (type === "vpcni" && (ipam === undefined || ipamType === "vpcni")) {
    socket = field(ipam, "daemonSocket") ?? field(raw, "daemonSocket");
    timeout = field(ipam, "daemonTimeoutMs") ?? field(raw, "daemonTimeoutMs");
  } else if (type !== "vpcni" && ipamType === "vpcni") {
    socket = field(ipam, "daemonSocket");
    timeout = field(ipam, "daemonTimeoutMs");
  } else {
    return undefined;
  }
  socket ??= DEFAULT_IPAM_SOCKET;
  timeout ??= verb === "ADD" ? DEFAULT_ADD_TIMEOUT_MS : DEFAULT_DAEMON_TIMEOUT_MS;
  if (
    typeof socket !== "string" || !socket.startsWith("/") ||
    new TextEncoder().encode(socket).length > SOCKET_PATH_MAX || socket.includes("\0")
  ) return undefined;
  if (
    typeof timeout !== "number" || !Number.isInteger(timeout) || timeout < 100 ||
    timeout > MAX_DAEMON_TIMEOUT_MS
  ) return undefined;
  const quiet = field(raw, "logFile") !== undefined || field(ipam, "logFile") !== undefined;
  return { socket, timeoutMs: timeout, cniVersion, quiet };
}

/** The daemon could not be reached at all (no socket, nobody listening). */
class DaemonDownError extends Error {}
/**
 * The daemon answered the invocation, but not in protocol 2: an older release (it refuses the
 * version), or something that is not vpcni's daemon. The full plugin speaks protocol 1 with
 * it and judges its answers as that protocol says.
 */
class NotProtocol2Error extends Error {}
/**
 * The daemon's mount namespace does not reach `CNI_NETNS`: it asks for the netns, which the
 * plugin opens in the runtime's mount namespace and hands over (cni/netns_fd_send.ts).
 */
class NeedNetnsFdError extends Error {}

/** Reads to EOF, or throws once more than `max` bytes came. */
async function readAnswer(conn: Deno.UnixConn, max: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const buf = new Uint8Array(64 * 1024);
  for (;;) {
    const n = await conn.read(buf);
    if (n === null) break;
    chunks.push(buf.slice(0, n));
    total += n;
    if (total > max) throw new RangeError(`an answer of more than ${max} bytes`);
  }
  return concatBytes(chunks);
}

/**
 * One exchange, bounded as a whole by `daemonTimeoutMs`: with the daemon running the
 * invocation, this is its one round trip. A daemon that does not answer within it is code 11
 * (try again later); an answer that is not HTTP, ends before it began, or is over the bound
 * is code 102. Messages as the full plugin's client (cni/ipam_client.ts) words them.
 */
async function exchange(route: Route, verb: string, body: string): Promise<string> {
  let conn: Deno.UnixConn;
  try {
    conn = await Deno.connect({ transport: "unix", path: route.socket });
  } catch (e) {
    throw new DaemonDownError((e as Error).message);
  }
  // The bound is an Atomics.waitAsync timeout, not setTimeout: a process's first setTimeout
  // costs ≈ 6 ms of timer set-up (measured here, beside a 17 ms empty start), waitAsync's
  // timeout is V8's own. It fires while the read below keeps the event loop busy.
  let timedOut = false;
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const bound = Atomics.waitAsync(cell, 0, 0, route.timeoutMs);
  if (bound.async) {
    bound.value.then((outcome) => {
      if (outcome !== "timed-out") return;
      timedOut = true;
      try {
        conn.close();
      } catch { /* already closed */ }
    });
  }
  const outside = (why: string) =>
    new CniError(
      ErrorCode.DAEMON_PROTOCOL,
      `IPAM daemon at ${route.socket} answered ${verb} outside the protocol`,
      `${why}; is daemonSocket the socket of 'vpcni serve'?`,
    );
  try {
    const out = httpPost(IPAM_PATH, body);
    for (let off = 0; off < out.length;) off += await conn.write(out.subarray(off));
    // Head and body: the body's bound plus room for the head.
    const raw = await readAnswer(conn, MAX_DAEMON_ANSWER_BYTES + 16 * 1024);
    try {
      return parseHttpResponse(raw).body;
    } catch (e) {
      throw outside((e as Error).message);
    }
  } catch (e) {
    if (timedOut) {
      throw new CniError(
        ErrorCode.TRY_AGAIN_LATER,
        `IPAM daemon at ${route.socket} did not answer ${verb} within ${route.timeoutMs} ms`,
        "the daemon may be busy growing its pool; the runtime retries (a DEL waits for the " +
          "ADD it follows, and removes what it made)",
      );
    }
    if (e instanceof CniError) throw e;
    throw outside((e as Error).message);
  } finally {
    Atomics.notify(cell, 0);
    try {
      conn.close();
    } catch { /* closed by the bound */ }
  }
}

/** The daemon's text, cut and without control characters (it reaches logs and terminals). */
function daemonText(v: string): string {
  // deno-lint-ignore no-control-regex
  const clean = v.replace(/[\x00-\x1f\x7f-\x9f]/g, " ").trim();
  return clean.length > 1024 ? `${clean.slice(0, 1024)}…` : clean;
}

/** Sends the invocation; returns what to print and the exit code. */
async function forward(
  route: Route,
  verb: string,
  env: Record<string, string>,
  stdin: string,
  netnsFd?: string,
): Promise<{ stdout: string; exitCode: number }> {
  const text = await exchange(
    route,
    verb,
    JSON.stringify({ version: CNI_PROTOCOL_VERSION, op: "cni", env, stdin, netnsFd }),
  );
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    throw new NotProtocol2Error("not JSON");
  }
  if (
    answer === null || typeof answer !== "object" ||
    (answer as { version?: unknown }).version !== CNI_PROTOCOL_VERSION
  ) {
    throw new NotProtocol2Error("no protocol version 2 in the answer");
  }
  const a = answer as Record<string, unknown>;
  if (a.ok === false && a.needNetnsFd === true && netnsFd === undefined) {
    throw new NeedNetnsFdError();
  }
  if (
    a.ok === true && typeof a.stdout === "string" && (a.exitCode === 0 || a.exitCode === 1)
  ) {
    return { stdout: a.stdout, exitCode: a.exitCode };
  }
  if (
    a.ok === false && typeof a.code === "number" && DAEMON_ERROR_CODES.includes(a.code) &&
    typeof a.msg === "string" && a.msg !== ""
  ) {
    const details = typeof a.details === "string" ? daemonText(a.details) : undefined;
    throw new CniError(a.code, daemonText(a.msg), details || undefined);
  }
  throw new CniError(
    ErrorCode.DAEMON_PROTOCOL,
    `IPAM daemon at ${route.socket} answered ${verb} outside protocol ${CNI_PROTOCOL_VERSION}`,
    "are the plugin and 'vpcni serve' from the same release?",
  );
}

/**
 * The invocation again, after the daemon asked for the pod's netns: the full plugin opens
 * `CNI_NETNS` here, in the runtime's mount namespace, and hands it to the daemon, and the
 * invocation names the token it got. A DEL whose netns is gone here too goes without it (the
 * node's side is cleaned up, as for any DEL of a gone netns); an ADD or CHECK of it is code 3.
 */
async function forwardWithNetns(
  route: Route,
  verb: string,
  env: Record<string, string>,
  stdin: string,
  plugin: FullPlugin,
): Promise<{ stdout: string; exitCode: number }> {
  const handed = handOverNetns(plugin, route.socket, verb, env.CNI_NETNS ?? "", route.timeoutMs);
  if ("token" in handed) return await forward(route, verb, env, stdin, handed.token);
  const { CNI_NETNS: _, ...rest } = env;
  return await forward(route, verb, rest, stdin);
}

/** Runs one invocation; returns the process exit code. */
export async function runThinPlugin(opts: ThinOptions): Promise<number> {
  const io = opts.io ?? thinProcessIo;
  const command = io.getEnv("CNI_COMMAND") ?? "";
  let stdinBytes: Uint8Array | undefined;
  const full = async (daemonDown = false) => {
    const plugin = await opts.loadFull();
    const bytes = stdinBytes;
    const fullIo: ThinIo = bytes === undefined ? io : { ...io, readStdin: () => bytes };
    return await plugin.runPlugin(fullIo, { daemonDown });
  };
  if (!VERBS.has(command)) return await full();
  try {
    stdinBytes = io.readStdin(STDIN_LIMIT);
  } catch {
    return await full();
  }
  if (stdinBytes.length > STDIN_LIMIT) return await full();
  let raw: unknown;
  let stdin: string;
  try {
    stdin = new TextDecoder("utf-8", { fatal: true }).decode(stdinBytes);
    raw = JSON.parse(stdin);
  } catch {
    return await full();
  }
  const route = routeOf(raw, command);
  if (!route) return await full();
  const env: Record<string, string> = {};
  for (const name of CNI_VARS) {
    const v = io.getEnv(name);
    if (v !== undefined) env[name] = v;
  }
  try {
    let answer;
    try {
      answer = await forward(route, command, env, stdin);
    } catch (e) {
      if (!(e instanceof NeedNetnsFdError)) throw e;
      answer = await forwardWithNetns(route, command, env, stdin, await opts.loadFull());
    }
    const { stdout, exitCode } = await explainUnseenNetns(
      command,
      env.CNI_NETNS,
      answer,
      opts.loadFull,
    );
    if (stdout !== "") io.writeStdout(stdout);
    return exitCode;
  } catch (e) {
    if (e instanceof NotProtocol2Error) return await full();
    if (e instanceof DaemonDownError) return await full(command === "DEL");
    let err = e instanceof CniError
      ? e
      : new CniError(ErrorCode.INTERNAL, `unexpected failure: ${(e as Error).message}`);
    // STATUS: every failure to reach a usable daemon means "plugin not available" (50).
    if (command === "STATUS" && ![50, 51, ErrorCode.INTERNAL].includes(err.code)) {
      err = new CniError(
        ErrorCode.PLUGIN_NOT_AVAILABLE,
        `plugin not available: ${err.message}`,
        err.details,
      );
    }
    const out = errorJson(
      err,
      isSupportedVersion(route.cniVersion) ? route.cniVersion : LATEST_CNI_VERSION,
    );
    if (!route.quiet) {
      console.error(`vpcni: ${command}: ${out.msg}${out.details ? ` (${out.details})` : ""}`);
    }
    io.writeStdout(JSON.stringify(out));
    return 1;
  }
}
