/**
 * A worker of the daemon's CNI service (ipam/cni_service.ts): runs whole invocations of the
 * main plugin — the same code the plugin runs (cni/plugin.ts), so every refusal, rollback and
 * error JSON is the plugin's — on a thread of its own. That thread is the only one that enters
 * pod network namespaces (netlink/netns.ts moves the calling thread and always moves it back),
 * and its synchronous netlink calls never stall the daemon's thread, which keeps serving other
 * pods' reservations and the warm loop.
 *
 * The plugin's round trips to the daemon do not go over the socket: the worker posts the
 * request body to the daemon's thread and blocks on a shared buffer until the answer is
 * written there (the plugin's daemon client is synchronous by design).
 *
 * Messages in: {@linkcode CniJob}. Messages out: {@linkcode IpamCall} while a job runs, then
 * {@linkcode CniJobDone}.
 *
 * @module
 */
/// <reference lib="deno.worker" />
import { runPlugin } from "../cni/plugin.ts";
import { prepareEniHost } from "../cni/datapath/mod.ts";
import type { DatapathConfig, DatapathEni } from "../cni/datapath/types.ts";
import { setDaemonTransport } from "../cni/ipam_client.ts";
import { UnixHttpTimeoutError } from "../cni/unix_http.ts";
import { MAX_DAEMON_ANSWER_BYTES } from "../proto/ipam.ts";
import { clearNetnsAlias, setNetnsAlias } from "../base/netns_alias.ts";
import { netnsReachable } from "../cni/netns_file.ts";

/** The verbs that open `CNI_NETNS`. */
const NETNS_VERBS = new Set(["ADD", "CHECK", "DEL"]);

/** One invocation to run. */
export interface CniJob {
  id: number;
  env: Record<string, string>;
  stdin: string;
  /**
   * The pod netns the plugin handed over (ipam/netns_fds.ts), open in this process: the verb
   * opens it as `/proc/self/fd/<n>` wherever it opens `CNI_NETNS`.
   */
  netnsFd?: number;
}

/** The host side of one ENI to set up (cni/datapath/mod.ts prepareEniHost). */
export interface HostJob {
  id: number;
  prepare: { config: DatapathConfig; eni: DatapathEni };
}

/** A reservation request of the running job, for the daemon's thread to answer. */
export interface IpamCall {
  type: "ipam";
  /** Numbers the worker's calls: an answer to a call given up on is never read as the next's. */
  seq: number;
  body: string;
}

/**
 * What the job printed and its exit code. For a {@linkcode HostJob}: 0 prepared, 2 the ENI's
 * link is not on the node yet, 1 failed (`stdout` says why).
 */
export interface CniJobDone {
  type: "done";
  id: number;
  exitCode: number;
  stdout: string;
  /**
   * Nothing ran: this process's mount namespace does not reach `CNI_NETNS` (nothing there,
   * or a file that is no namespace); the plugin must hand the netns over.
   */
  needNetnsFd?: boolean;
}

/**
 * The shared answer buffer: word 0 is the state (0 waiting, 1 answered), word 1 the answer's
 * length in bytes, word 2 the number of the call waiting; the answer follows from byte 12.
 */
export const ANSWER_HEADER_BYTES = 12;

/** Size of the shared answer buffer. */
export const ANSWER_BUFFER_BYTES = ANSWER_HEADER_BYTES + MAX_DAEMON_ANSWER_BYTES;

/** Writes `answer` into the worker's shared buffer and wakes the worker. */
export function writeAnswer(shared: SharedArrayBuffer, seq: number, answer: string): void {
  const words = new Int32Array(shared, 0, 3);
  // The worker gave up on this call (timeout) and may be waiting for a later one.
  if (Atomics.load(words, 2) !== seq) return;
  let bytes = new TextEncoder().encode(answer);
  if (bytes.length > MAX_DAEMON_ANSWER_BYTES) {
    bytes = new TextEncoder().encode(
      JSON.stringify({ ok: false, code: 11, msg: "daemon answer over the protocol's bound" }),
    );
  }
  new Uint8Array(shared, ANSWER_HEADER_BYTES, bytes.length).set(bytes);
  Atomics.store(words, 1, bytes.length);
  Atomics.store(words, 0, 1);
  Atomics.notify(words, 0);
}

/** The worker's first message: its answer buffer, and the netns it acts from. */
export interface CniWorkerStart {
  shared: SharedArrayBuffer;
  /** The node's netns when it is not the daemon's (a test's node); absent in production. */
  netns?: string;
}

async function startWorker({ shared, netns }: CniWorkerStart): Promise<void> {
  if (netns !== undefined) {
    const { moveThreadToNetns } = await import("../netlink/netns.ts");
    moveThreadToNetns(netns);
  }
  const words = new Int32Array(shared, 0, 3);
  let seq = 0;
  /** The running job's netns was handed over: its reservation says so. */
  let hidden = false;
  setDaemonTransport((_socket, request, timeoutMs) => {
    const body = hidden ? markNetnsHidden(request) : request;
    seq = (seq + 1) | 0;
    Atomics.store(words, 0, 0);
    Atomics.store(words, 2, seq);
    self.postMessage({ type: "ipam", seq, body } satisfies IpamCall);
    if (Atomics.wait(words, 0, 0, timeoutMs) === "timed-out") {
      Atomics.store(words, 2, 0);
      throw new UnixHttpTimeoutError("the daemon (its own thread)", timeoutMs);
    }
    const length = Atomics.load(words, 1);
    const text = new TextDecoder().decode(
      new Uint8Array(shared, ANSWER_HEADER_BYTES, length).slice(),
    );
    return { status: 200, body: text };
  });
  self.onmessage = async (e: MessageEvent<CniJob | HostJob>) => {
    if ("prepare" in e.data) {
      const { id, prepare } = e.data;
      let exitCode = 0;
      let stdout = "";
      try {
        if (!prepareEniHost(prepare.config, prepare.eni)) exitCode = 2;
      } catch (err) {
        exitCode = 1;
        stdout = (err as Error).message;
      }
      self.postMessage({ type: "done", id, exitCode, stdout } satisfies CniJobDone);
      return;
    }
    const { id, env, stdin, netnsFd } = e.data;
    const netns = Object.hasOwn(env, "CNI_NETNS") ? env.CNI_NETNS : "";
    const opensNetns = netns !== "" && NETNS_VERBS.has(env.CNI_COMMAND);
    if (opensNetns && netnsFd === undefined && !netnsReachable(netns)) {
      const done: CniJobDone = { type: "done", id, exitCode: 1, stdout: "", needNetnsFd: true };
      self.postMessage(done);
      return;
    }
    let stdout = "";
    if (opensNetns && netnsFd !== undefined) {
      setNetnsAlias(netns, `/proc/self/fd/${netnsFd}`);
      hidden = true;
    }
    let exitCode: number;
    try {
      exitCode = await runPlugin({
        getEnv: (name) => Object.hasOwn(env, name) ? env[name] : undefined,
        readStdin: () => new TextEncoder().encode(stdin),
        writeStdout: (text) => (stdout += text),
      });
    } finally {
      clearNetnsAlias();
      hidden = false;
    }
    self.postMessage({ type: "done", id, exitCode, stdout } satisfies CniJobDone);
  };
}

/**
 * An ADD's reservation request, marked as one whose pod netns the daemon cannot see
 * (`netnsHidden`); other requests unchanged.
 */
function markNetnsHidden(body: string): string {
  try {
    const req = JSON.parse(body);
    if (req && typeof req === "object" && req.op === "add") {
      return JSON.stringify({ ...req, netnsHidden: true });
    }
  } catch { /* not JSON: the daemon refuses it as it is */ }
  return body;
}

/** The name the daemon gives its CNI workers. */
export const CNI_WORKER_NAME = "vpcni-cni-worker";

/**
 * True on a CNI worker's thread. This module is also part of the whole plugin's bundle
 * (cli/plugin_full.ts), which the thin plugin may load: there it must do nothing.
 */
export function isCniWorker(): boolean {
  return (globalThis as { name?: unknown }).name === CNI_WORKER_NAME;
}

if (isCniWorker()) {
  // The first message is the shared answer buffer; jobs follow.
  self.onmessage = (e: MessageEvent<CniWorkerStart>) => startWorker(e.data);
}
