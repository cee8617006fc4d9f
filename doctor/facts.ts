/**
 * Gathers what doctor knows about the node, from the best source that answers: the
 * daemon's loopback introspection when it is up; otherwise the checkpoint on disk, IMDS and
 * the kernel directly (and a note saying so). Nothing here changes anything.
 *
 * @module
 */
import { z } from "zod";
import { parse as parseYaml } from "yaml";
import {
  type Checkpoint,
  CHECKPOINT_FILE,
  NewerCheckpointError,
  readCheckpoint,
} from "../ipam/checkpoint.ts";
import { configSchema } from "../ipam/config.ts";
import { ImdsClient, type NodeMetadata } from "../aws/imds.ts";
import type { EniInfo } from "../proto/ipam.ts";
import {
  allocationViewSchema as allocationSchema,
  type ConfigView,
  configViewSchema,
  cooldownViewSchema as cooldownSchema,
  type EniView,
  eniViewSchema,
  type PoolView,
  poolViewSchema,
  routedUnknownViewSchema as routedUnknownSchema,
} from "../proto/introspect.ts";
import type { AllocationFact } from "./datapath.ts";
import { subnetGateway } from "../ipam/subnets.ts";

/** Where doctor looks; every field has a flag (see doctor/cli.ts). */
export interface DoctorOptions {
  /** Base URL of the daemon's introspection, e.g. http://127.0.0.1:61679. */
  daemonUrl: string;
  stateDir: string;
  /** The daemon's config file, read when the daemon is down. */
  configFile?: string;
  conflistFile: string;
  binDir: string;
  imdsEndpoint?: string;
  ec2Endpoint?: string;
  region?: string;
  /** kubelet's --max-pods, when given; otherwise read from kubelet's config/args. */
  kubeletMaxPods?: number;
  kubeletConfig: string;
  /** Per-request limit for the daemon, IMDS and EC2. */
  timeoutMs: number;
  /**
   * The netns to inspect as the node's host netns (a path); doctor's own when absent. For
   * nodes whose pod networking lives in a netns, such as the demo and the tests.
   */
  hostNetns?: string;
}

/** The daemon's answers to the liveness and readiness probes. */
export interface DaemonStatus {
  reachable: boolean;
  healthy: boolean;
  ready: boolean;
  detail: string;
}

export {
  type ConfigView,
  configViewSchema,
  type EniView,
  eniViewSchema,
  type PoolView,
  poolViewSchema,
} from "../proto/introspect.ts";

/** Everything the checks look at. */
export interface Facts {
  /** "daemon" or "checkpoint+kernel". */
  source: string;
  notes: string[];
  daemon: DaemonStatus;
  config: ConfigView;
  pools: PoolView[];
  enis: EniView[];
  allocations: AllocationFact[];
  cooldowns: z.infer<typeof cooldownSchema>[];
  /**
   * Addresses the daemon holds because the host still routes them to pods no allocation
   * names (after a lost checkpoint). Known only from the daemon: it is not checkpointed.
   */
  routedUnknown: string[];
  checkpoint?: Checkpoint;
  checkpointError?: string;
  /** The checkpoint exists but cannot be read or parsed (not merely absent). */
  checkpointCorrupt?: boolean;
  /** The schema version of a checkpoint a newer release wrote (then it is not corrupt). */
  checkpointNewer?: number;
  metadata?: NodeMetadata;
  imdsError?: string;
  /** Prometheus text from /metrics. */
  metrics?: string;
}

async function get(base: string, path: string, timeoutMs: number): Promise<Response> {
  return await fetch(`${base}${path}`, { signal: AbortSignal.timeout(timeoutMs) });
}

/** Probes /healthz and /readyz. */
export async function daemonStatus(base: string, timeoutMs: number): Promise<DaemonStatus> {
  let health: Response;
  try {
    health = await get(base, "/healthz", timeoutMs);
  } catch (e) {
    const why = (e as Error).name === "TimeoutError"
      ? `no answer within ${timeoutMs} ms`
      : (e as Error).message.replace(/^.*?: /, "");
    return { reachable: false, healthy: false, ready: false, detail: `${base}: ${why}` };
  }
  const hBody = (await health.text()).trim();
  let ready = false;
  let rBody = "";
  try {
    const r = await get(base, "/readyz", timeoutMs);
    ready = r.ok;
    rBody = (await r.text()).trim();
  } catch (e) {
    rBody = (e as Error).message;
  }
  return {
    reachable: true,
    healthy: health.ok,
    ready,
    detail: `/healthz ${health.status} ${hBody}; /readyz ${ready ? "ready" : rBody || "not ready"}`,
  };
}

async function getJson<T>(
  base: string,
  path: string,
  schema: z.ZodType<T>,
  timeoutMs: number,
): Promise<T> {
  const r = await get(base, path, timeoutMs);
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  const parsed = schema.safeParse(await r.json());
  if (!parsed.success) {
    throw new Error(`${path}: unexpected answer (${parsed.error.issues[0]?.message})`);
  }
  return parsed.data;
}

/** EniInfo (what the datapath needs) from an ENI view. */
export function eniInfo(e: EniView, routeTableBase: number): EniInfo {
  const primary = e.primary ?? e.deviceIndex === 0;
  return {
    id: e.id,
    mac: e.mac.toLowerCase(),
    deviceIndex: e.deviceIndex,
    primary,
    subnetId: e.subnetId,
    subnetCidr: e.subnetCidr,
    gateway: subnetGateway(e.subnetCidr),
    routeTable: primary ? 254 : routeTableBase + e.deviceIndex,
  };
}

/**
 * The daemon's config when nothing says otherwise: its own defaults (ipam/config.ts), the one
 * place they live.
 */
export function defaultConfig(): ConfigView {
  return configSchema.parse({});
}

/**
 * Reads the daemon config as the daemon would (its schema, its defaults, before environment
 * and flags); errors are one line: `file:line:col: what` or `field: what`.
 */
async function readConfigFile(path: string): Promise<ConfigView> {
  let raw: unknown;
  try {
    raw = parseYaml(await Deno.readTextFile(path)) ?? {};
  } catch (e) {
    const pos = (e as { linePos?: { line: number; col: number }[] }).linePos?.[0];
    const first = (e as Error).message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "");
    throw new Error(`${pos ? `line ${pos.line}, column ${pos.col}: ` : ""}${first}`);
  }
  const r = configSchema.safeParse(raw);
  if (!r.success) {
    const i = r.error.issues[0];
    throw new Error(`${i.path.join(".") || "(top level)"}: ${i.message}`);
  }
  return r.data;
}

/** Reads IMDS (short limits: doctor must answer fast when IMDS is unreachable). */
export async function readMetadata(o: DoctorOptions): Promise<NodeMetadata> {
  const c = new ImdsClient({
    endpoint: o.imdsEndpoint,
    timeoutMs: o.timeoutMs,
    attemptTimeoutMs: Math.min(1000, o.timeoutMs),
    retries: 1,
  });
  return await c.getNodeMetadata();
}

/**
 * Facts with nothing known yet but the daemon's status: the defaults for config, no pools,
 * ENIs or allocations, read from the daemon (`source` is changed when they are not).
 */
export function emptyFacts(daemon: DaemonStatus, notes: string[] = []): Facts {
  return {
    source: "daemon",
    notes,
    daemon,
    config: defaultConfig(),
    pools: [],
    enis: [],
    allocations: [],
    cooldowns: [],
    routedUnknown: [],
  };
}

/** Collects the facts: from the daemon if it answers, else from disk, IMDS and kernel. */
export async function gatherFacts(o: DoctorOptions): Promise<Facts> {
  const notes: string[] = [];
  const daemon = await daemonStatus(o.daemonUrl, o.timeoutMs);
  const facts = emptyFacts(daemon, notes);
  const [cp, md] = await Promise.allSettled([readCheckpoint(o.stateDir), readMetadata(o)]);
  if (cp.status === "fulfilled") {
    facts.checkpoint = cp.value;
    if (!cp.value) facts.checkpointError = `no checkpoint at ${o.stateDir}/${CHECKPOINT_FILE}`;
  } else {
    facts.checkpointError = (cp.reason as Error).message;
    if (cp.reason instanceof NewerCheckpointError) facts.checkpointNewer = cp.reason.found;
    else facts.checkpointCorrupt = true;
  }
  if (md.status === "fulfilled") facts.metadata = md.value;
  else facts.imdsError = (md.reason as Error).message;

  if (daemon.reachable) {
    try {
      const t = o.timeoutMs;
      const [pools, enis, allocs, cools, routed, cfg] = await Promise.all([
        getJson(o.daemonUrl, "/v1/pools", z.array(poolViewSchema), t),
        getJson(o.daemonUrl, "/v1/enis", z.array(eniViewSchema), t),
        getJson(o.daemonUrl, "/v1/allocations", z.array(allocationSchema), t),
        getJson(o.daemonUrl, "/v1/cooldowns", z.array(cooldownSchema), t),
        getJson(o.daemonUrl, "/v1/routed-unknown", routedUnknownSchema, t),
        getJson(o.daemonUrl, "/v1/config", configViewSchema, t),
      ]);
      facts.pools = pools;
      facts.enis = enis;
      facts.allocations = allocs;
      facts.cooldowns = cools;
      facts.routedUnknown = routed;
      facts.config = cfg;
      try {
        const m = await get(o.daemonUrl, "/metrics", t);
        if (m.ok) facts.metrics = await m.text();
      } catch { /* metrics are optional for the checks */ }
      return withEnis(facts);
    } catch (e) {
      notes.push(`the daemon answers but its introspection failed (${(e as Error).message})`);
    }
  }

  facts.source = "checkpoint+kernel";
  notes.push(
    `the daemon is not answering at ${o.daemonUrl}: reading the checkpoint in ${o.stateDir}, ` +
      `IMDS and the kernel directly`,
  );
  if (o.configFile) {
    try {
      facts.config = await readConfigFile(o.configFile);
    } catch (e) {
      notes.push(`--config ${o.configFile}: ${(e as Error).message}; using defaults`);
    }
  }
  if (facts.checkpoint) {
    facts.allocations = facts.checkpoint.allocations;
    facts.cooldowns = facts.checkpoint.cooldowns.filter((c) => c.until > Date.now());
    facts.routedUnknown = facts.checkpoint.routedUnknown ?? [];
  }
  if (facts.metadata) {
    facts.enis = facts.metadata.enis.map((e) => ({
      id: e.eniId,
      mac: e.mac,
      deviceIndex: e.deviceIndex,
      subnetId: e.subnetId,
      subnetCidr: e.subnetCidr,
      primary: e.deviceIndex === 0,
      ips: e.localIpv4s.slice(e.deviceIndex === 0 ? 1 : 1),
      prefixes: e.ipv4Prefixes,
      securityGroupIds: e.securityGroupIds,
    }));
  }
  return withEnis(facts);
}

/** Attaches EniInfo to each allocation whose ENI is known. */
function withEnis(f: Facts): Facts {
  const byId = new Map(f.enis.map((e) => [e.id, eniInfo(e, f.config.routeTableBase)]));
  f.allocations = f.allocations.map((a) => ({ ...a, eni: byId.get(a.eniId) }));
  return f;
}
