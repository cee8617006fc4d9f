/**
 * The daemon's CNI service: runs whole invocations of the `vpcni` main plugin that the thin
 * plugin (cni/thin.ts) forwards — reservation and datapath in one place, with the plugin's own
 * checks and its one rollback (ipam/cni_worker.ts runs cni/plugin.ts).
 *
 * - One lock per attachment (container id and interface name): an ADD, CHECK or DEL of an
 *   attachment waits for the one before it, so a DEL sent while its ADD is still wiring
 *   removes what that ADD made, and a second ADD sees the first one's reservation (code 106).
 * - Invocations run on workers, never on the daemon's thread: netlink calls are synchronous
 *   and a pod's netns is entered by the calling thread, so the daemon's thread keeps serving
 *   reservations and the warm loop however long an ADD takes. Up to `maxWorkers` run at once
 *   (a long ADD holds one worker; others serve the rest); more wait in order. Workers are
 *   started on demand and stopped after `idleMs` idle, unless `warm` keeps the first one
 *   running from the start, so no pod waits ≈ 70 ms for it to start. (Measured here: the
 *   first worker adds ≈ 12 MiB to the process's RSS, and stopping it gives back only ≈ 2–3
 *   MiB: the rest stays with the process; later workers reuse it.)
 *
 * @module
 */
import type {
  CniRunRequest,
  CniRunResponse,
  IpamErrorResponse,
  IpamResponse,
} from "../proto/ipam.ts";
import type { DatapathConfig, DatapathEni } from "../cni/datapath/types.ts";
import { CNI_PROTOCOL_VERSION } from "../proto/ipam.ts";
import {
  ANSWER_BUFFER_BYTES,
  CNI_WORKER_NAME,
  type CniJob,
  type CniJobDone,
  type CniWorkerStart,
  type HostJob,
  type IpamCall,
  writeAnswer,
} from "./cni_worker.ts";
import { closeFd, type NetnsFds } from "./netns_fds.ts";

let workerEntry = new URL("./cni_worker.ts", import.meta.url).href;

/**
 * Makes `url` the module CNI workers start from: the bundled program names itself
 * (cli/entry.ts), as a bundle has no ipam/cni_worker.ts beside it.
 */
export function setCniWorkerEntry(url: string): void {
  workerEntry = url;
}

/** Answers one reservation request body (the daemon's api, or a test's stand-in). */
export type IpamAnswerer = (body: string) => Promise<IpamResponse>;

/** How the service runs. */
export interface CniServiceOptions {
  /** Invocations run at once at most (default 3). */
  maxWorkers?: number;
  /**
   * Start the first worker now and keep it running, rather than start it at the first
   * request and stop it when idle (default false).
   */
  warm?: boolean;
  /** How long a worker may stay idle before it is stopped (default 60 s). */
  idleMs?: number;
  /**
   * The netns the workers act from, when the node's is not the daemon's own: a test's node
   * netns. The daemon runs in the node's netns and leaves this unset.
   */
  netns?: string;
}

interface Slot {
  worker: Worker;
  shared: SharedArrayBuffer;
  busy: boolean;
  /** The worker died (an uncaught error): never handed out again. */
  dead?: boolean;
  done?: (d: CniJobDone) => void;
  idleTimer?: ReturnType<typeof setTimeout>;
}

/** Runs forwarded CNI invocations; see the module doc. */
export class CniService {
  #answer: IpamAnswerer;
  #max: number;
  #idleMs: number;
  #slots: Slot[] = [];
  #waiting: ((s: Slot) => void)[] = [];
  #locks = new Map<string, Promise<unknown>>();
  #nextId = 1;
  #closed = false;
  #netns?: string;
  #warm: boolean;
  #netnsFds?: NetnsFds;
  #netnsFdsProblem = "the daemon serves no netns socket";

  /** Makes the service; `answer` serves the plugin's reservation requests. */
  constructor(answer: IpamAnswerer, opts: CniServiceOptions = {}) {
    this.#answer = answer;
    this.#max = Math.max(1, opts.maxWorkers ?? 3);
    this.#idleMs = opts.idleMs ?? 60_000;
    this.#netns = opts.netns;
    this.#warm = opts.warm ?? false;
    if (this.#warm) this.#slots.push(this.#spawn());
  }

  /** Workers running now (for tests and the metrics). */
  get workers(): number {
    return this.#slots.length;
  }

  /**
   * Takes pod netns the plugin hands over from `fds` (ipam/netns_fds.ts); undefined: none
   * (`problem` says why, in the error a pod then gets).
   */
  useNetnsFds(fds: NetnsFds | undefined, problem?: string): void {
    this.#netnsFds = fds;
    if (problem) this.#netnsFdsProblem = problem;
  }

  /**
   * Runs one invocation under its attachment's lock; answers what the plugin printed, or,
   * when the daemon's mount namespace does not reach `CNI_NETNS`, asks for the netns
   * (`needNetnsFd`).
   */
  async run(req: CniRunRequest): Promise<CniRunResponse | IpamErrorResponse> {
    // Taken at once: the descriptor is closed after the verb, or if it never runs.
    let fd: number | undefined;
    if (req.netnsFd !== undefined) {
      fd = this.#netnsFds?.take(req.netnsFd);
      if (fd === undefined) {
        return {
          ok: false,
          version: CNI_PROTOCOL_VERSION,
          code: 11,
          msg: `the pod netns handed over for CNI_NETNS ${
            req.env.CNI_NETNS ?? ""
          } is unknown to the daemon (it keeps one for 30 s, and until a restart)`,
          details: "the runtime retries; the plugin hands the netns over again",
        };
      }
    }
    const key = `${req.env.CNI_CONTAINERID ?? ""}\u0000${req.env.CNI_IFNAME ?? ""}`;
    const before = this.#locks.get(key) ?? Promise.resolve();
    const mine = before.catch(() => {}).then(() => this.#runOnWorker(req, fd));
    this.#locks.set(key, mine);
    try {
      return await mine;
    } finally {
      if (this.#locks.get(key) === mine) this.#locks.delete(key);
      if (fd !== undefined) closeFd(fd);
    }
  }

  /**
   * Sets up the host side of `eni` (link up, sysctls, its address and table T(E)) on a worker:
   * "ready", "absent" while no link on the node has its MAC yet, or throws what failed.
   */
  async prepareHost(config: DatapathConfig, eni: DatapathEni): Promise<"ready" | "absent"> {
    if (this.#closed) throw new Error("the daemon is stopping");
    const slot = await this.#acquire();
    try {
      const job: HostJob = { id: this.#nextId++, prepare: { config, eni } };
      const done = await new Promise<CniJobDone>((resolve) => {
        slot.done = resolve;
        slot.worker.postMessage(job);
      });
      if (done.exitCode === 1) throw new Error(done.stdout);
      return done.exitCode === 0 ? "ready" : "absent";
    } finally {
      slot.done = undefined;
      this.#release(slot);
    }
  }

  /**
   * Makes later workers act from the netns at `path` (a test's node, when the daemon runs
   * outside it) and stops the idle ones, which act from the old one.
   */
  useNetns(path: string): void {
    this.#netns = path;
    for (const s of this.#slots.filter((s) => !s.busy)) {
      clearTimeout(s.idleTimer);
      s.worker.terminate();
    }
    this.#slots = this.#slots.filter((s) => s.busy);
  }

  /** Stops every worker; later requests are refused. */
  close(): void {
    this.#closed = true;
    for (const s of this.#slots) {
      clearTimeout(s.idleTimer);
      s.worker.terminate();
    }
    this.#slots = [];
  }

  async #runOnWorker(
    req: CniRunRequest,
    netnsFd: number | undefined,
  ): Promise<CniRunResponse | IpamErrorResponse> {
    if (this.#closed) throw new Error("the daemon is stopping");
    const slot = await this.#acquire();
    try {
      const job: CniJob = { id: this.#nextId++, env: req.env, stdin: req.stdin, netnsFd };
      const done = await new Promise<CniJobDone>((resolve) => {
        slot.done = resolve;
        slot.worker.postMessage(job);
      });
      if (done.needNetnsFd) return this.#needNetnsFd(req.env.CNI_NETNS ?? "");
      return {
        ok: true,
        version: CNI_PROTOCOL_VERSION,
        exitCode: done.exitCode,
        stdout: done.stdout,
      };
    } finally {
      slot.done = undefined;
      this.#release(slot);
    }
  }

  /**
   * The answer when the daemon's mount namespace does not reach `netns`: a plugin of this
   * release hands the netns over; an older plugin prints code and message, which name the
   * cause and the fix. Without a netns socket, only the fix.
   */
  #needNetnsFd(netns: string): IpamErrorResponse {
    const dir = netns.slice(0, netns.lastIndexOf("/")) || "/";
    const fix = `mount the runtime's netns directory (${dir}) into the daemon's container with ` +
      "mountPropagation: HostToContainer";
    const cause = `the IPAM daemon's mount namespace does not reach CNI_NETNS ${netns}`;
    if (!this.#netnsFds) {
      return {
        ok: false,
        version: CNI_PROTOCOL_VERSION,
        code: 4,
        msg: `${cause}, and the plugin cannot hand it over: ${this.#netnsFdsProblem}`,
        details: fix,
      };
    }
    return {
      ok: false,
      version: CNI_PROTOCOL_VERSION,
      code: 4,
      msg: `${cause}; a plugin of the daemon's release hands the netns over`,
      details: `${fix}, or install the plugin of the daemon's release`,
      needNetnsFd: true,
    };
  }

  #acquire(): Promise<Slot> {
    const free = this.#slots.find((s) => !s.busy);
    if (free) {
      free.busy = true;
      clearTimeout(free.idleTimer);
      return Promise.resolve(free);
    }
    if (this.#slots.length < this.#max) {
      const s = this.#spawn();
      s.busy = true;
      this.#slots.push(s);
      return Promise.resolve(s);
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(slot: Slot): void {
    if (slot.dead) {
      // A waiting request gets a fresh worker in the dead one's place.
      const next = this.#waiting.shift();
      if (next && !this.#closed) {
        const fresh = this.#spawn();
        fresh.busy = true;
        this.#slots.push(fresh);
        next(fresh);
      }
      return;
    }
    const next = this.#waiting.shift();
    if (next) return next(slot);
    slot.busy = false;
    if (!this.#warm || this.#slots[0] !== slot) {
      slot.idleTimer = setTimeout(() => {
        if (slot.busy) return;
        slot.worker.terminate();
        this.#slots = this.#slots.filter((s) => s !== slot);
      }, this.#idleMs);
      // An idle worker's timer alone does not keep a process alive.
      Deno.unrefTimer(slot.idleTimer);
    }
  }

  #spawn(): Slot {
    const worker = new Worker(workerEntry, { type: "module", name: CNI_WORKER_NAME });
    const shared = new SharedArrayBuffer(ANSWER_BUFFER_BYTES);
    const slot: Slot = { worker, shared, busy: false };
    worker.onmessage = (e: MessageEvent<IpamCall | CniJobDone>) => {
      const m = e.data;
      if (m.type === "done") return slot.done?.(m);
      this.#answer(m.body).then(
        (answer) => writeAnswer(shared, m.seq, JSON.stringify(answer)),
        (err) =>
          writeAnswer(
            shared,
            m.seq,
            JSON.stringify({ ok: false, code: 11, msg: `daemon error: ${String(err)}` }),
          ),
      );
    };
    worker.onerror = (e) => {
      // A worker that died answers its job as the plugin would answer a bug, and is replaced.
      e.preventDefault();
      slot.dead = true;
      worker.terminate();
      slot.done?.({
        type: "done",
        id: 0,
        exitCode: 1,
        stdout: JSON.stringify({
          cniVersion: "1.1.0",
          code: 999,
          msg: `the daemon's CNI worker failed: ${e.message}`,
          details: "the daemon's log has more; the runtime retries",
        }),
      });
      this.#slots = this.#slots.filter((s) => s !== slot);
    };
    worker.postMessage({ shared, netns: this.#netns } satisfies CniWorkerStart);
    return slot;
  }
}
