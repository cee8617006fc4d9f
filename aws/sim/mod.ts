/**
 * The AWS simulator: the EC2 Query API and one IMDSv2 endpoint per instance, on loopback,
 * served from one {@linkcode SimState}, with run-time fault injection.
 *
 * ```ts
 * const sim = await startSim({ scenario: "examples/scenarios/one-node.yaml" });
 * // new EC2Client({ endpoint: sim.ec2Endpoint, region: sim.state.region, credentials: … })
 * // AWS_EC2_METADATA_SERVICE_ENDPOINT = sim.imdsEndpointFor("i-…")
 * sim.faults.attachDelayMs = 500;
 * await sim.close();
 * ```
 *
 * @module
 */
import {
  checkScenario,
  parseScenario,
  type Scenario,
  ScenarioError,
  type ScenarioInput,
} from "./scenario.ts";
import { SimState } from "./state.ts";
import { defaultFaults, type FaultConfig, FaultInjector } from "./faults.ts";
import { categoryOf, type Ec2Answer, errorXml, handleEc2, isKnownAction } from "./ec2_api.ts";
import { QueryParams } from "./query.ts";
import { ImdsHandler } from "./imds.ts";
import { handleControl } from "./control.ts";

export { loadScenario, parseScenario, ScenarioError } from "./scenario.ts";
export type { Scenario, ScenarioInput, ScenarioIssue } from "./scenario.ts";
export { SimState } from "./state.ts";
export type {
  AttachmentState,
  EniState,
  InstanceState,
  SecurityGroupState,
  SimEvent,
  SubnetState,
  TypeLimits,
} from "./state.ts";
export { AWS_ACCOUNT_BUCKETS, AWS_DEFAULT_BUCKETS, defaultFaults } from "./faults.ts";
export type { ActionCategory, BucketSpec, FaultConfig } from "./faults.ts";
export { SimError } from "./errors.ts";

/** Options of {@linkcode startSim}. */
export interface StartSimOptions {
  /** A scenario object, or the path of a YAML/JSON scenario file. */
  scenario: Scenario | ScenarioInput | string;
  /** EC2 port on 127.0.0.1 (0 or absent: any free port). IMDS ports follow it when set. */
  port?: number;
  /** Log one line per request: `true` → stderr, a string → append to that file. */
  log?: boolean | string;
  /** Random source for probabilistic faults (tests make them deterministic). */
  random?: () => number;
  /** Clock of the request-rate buckets in ms (a bench runs them on a scaled clock). */
  clock?: () => number;
}

/** Counters of served requests. */
export interface SimStats {
  /** EC2 requests per action (including failed ones). */
  ec2: Map<string, number>;
  /** EC2 errors per `Action:Code`. */
  errors: Map<string, number>;
  /** IMDS requests per instance. */
  imds: Map<string, number>;
}

/** A running simulator. */
export interface SimServer {
  /** `http://127.0.0.1:PORT` of the EC2 Query API. */
  ec2Endpoint: string;
  /** IMDS endpoint of the first instance (`http://127.0.0.1:PORT`). */
  imdsEndpoint: string;
  /** The IMDS endpoint of a given instance; throws for an unknown instance. */
  imdsEndpointFor(instanceId: string): string;
  /** The live world, inspectable (and mutable) by tests. */
  state: SimState;
  /** Mutable at run time; changes apply to the next request. */
  faults: FaultConfig;
  /** Request counters. */
  stats: SimStats;
  /** Stops every listener and timer. */
  close(): Promise<void>;
}

function mergeFaults(base: FaultConfig, f: Scenario["faults"]): FaultConfig {
  const b = base.buckets;
  return {
    throttle: f.throttle ?? base.throttle,
    accountLimits: f.accountLimits ?? base.accountLimits,
    buckets: {
      nonMutating: f.buckets?.nonMutating ?? b.nonMutating,
      unfilteredNonMutating: f.buckets?.unfilteredNonMutating ?? b.unfilteredNonMutating,
      mutating: f.buckets?.mutating ?? b.mutating,
    },
    actionBuckets: { ...base.actionBuckets, ...f.actionBuckets },
    throttleProbability: f.throttleProbability ?? base.throttleProbability,
    errorRate: f.errorRate ?? base.errorRate,
    latencyMs: { ...base.latencyMs, ...f.latencyMs },
    consistencyDelayMs: f.consistencyDelayMs ?? base.consistencyDelayMs,
    attachDelayMs: f.attachDelayMs ?? base.attachDelayMs,
    imdsDelayMs: f.imdsDelayMs ?? base.imdsDelayMs,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts the simulator; resolves once every endpoint listens. */
export async function startSim(o: StartSimOptions): Promise<SimServer> {
  const scenario = typeof o.scenario === "string"
    ? parseScenario(await readScenarioFile(o.scenario), o.scenario)
    : checkScenario(o.scenario);
  const faults = mergeFaults(defaultFaults(), scenario.faults);
  const source = typeof o.scenario === "string" ? o.scenario : "<scenario object>";
  const state = new SimState(scenario, faults, source);
  const injector = new FaultInjector(faults, o.random, o.clock);
  const stats: SimStats = { ec2: new Map(), errors: new Map(), imds: new Map() };
  const logLine = makeLogger(o.log);
  const servers: Deno.HttpServer[] = [];

  const ec2Server = Deno.serve(
    { hostname: "127.0.0.1", port: o.port ?? 0, onListen: () => {} },
    async (req) => {
      const started = performance.now();
      const url = new URL(req.url);
      if (url.pathname.startsWith("/_sim/")) {
        const res = await handleControl(req, url.pathname, state, faults, stats);
        if (res) return res;
      }
      let params: URLSearchParams;
      if (req.method === "POST") {
        params = new URLSearchParams(await req.text());
        for (const [k, v] of url.searchParams) params.append(k, v);
      } else if (req.method === "GET") {
        params = url.searchParams;
      } else {
        return new Response("Method Not Allowed", { status: 405 });
      }
      const q = new QueryParams(params);
      const action = q.get("Action") ?? "";
      const requestId = crypto.randomUUID();
      let answer: Ec2Answer;
      if (isKnownAction(action)) {
        stats.ec2.set(action, (stats.ec2.get(action) ?? 0) + 1);
        const latency = injector.latencyFor(action);
        if (latency > 0) await sleep(latency);
        const d = injector.decide(action, categoryOf(action, q));
        answer = d.kind === "error"
          ? { status: d.status, body: errorXml(d.code, d.message, requestId), code: d.code }
          : handleEc2(state, q, requestId);
      } else {
        answer = handleEc2(state, q, requestId);
      }
      if (answer.code) {
        const key = `${action}:${answer.code}`;
        stats.errors.set(key, (stats.errors.get(key) ?? 0) + 1);
      }
      logLine?.(
        `ec2 ${action || "-"} ${answer.status} ${answer.code ?? "-"} ${
          (performance.now() - started).toFixed(1)
        }ms ${requestId}`,
      );
      return new Response(answer.body, {
        status: answer.status,
        headers: { "content-type": "text/xml;charset=UTF-8", "x-amzn-requestid": requestId },
      });
    },
  );
  servers.push(ec2Server);
  const ec2Port = ec2Server.addr.port;

  const imdsEndpoints = new Map<string, string>();
  let i = 0;
  for (const id of state.instances.keys()) {
    i++;
    const handler = new ImdsHandler(state, id);
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: o.port ? o.port + i : 0, onListen: () => {} },
      (req) => {
        stats.imds.set(id, (stats.imds.get(id) ?? 0) + 1);
        const res = handler.handle(req);
        logLine?.(`imds ${id} ${req.method} ${new URL(req.url).pathname} ${res.status}`);
        return res;
      },
    );
    servers.push(server);
    imdsEndpoints.set(id, `http://127.0.0.1:${server.addr.port}`);
  }
  const firstImds = imdsEndpoints.values().next().value ?? "";

  return {
    ec2Endpoint: `http://127.0.0.1:${ec2Port}`,
    imdsEndpoint: firstImds,
    imdsEndpointFor(instanceId: string): string {
      const e = imdsEndpoints.get(instanceId);
      if (!e) throw new Error(`the simulator has no instance ${instanceId}`);
      return e;
    },
    state,
    faults,
    stats,
    async close() {
      state.close();
      await Promise.all(servers.map((s) => s.shutdown()));
      logLine?.close?.();
    },
  };
}

async function readScenarioFile(path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    throw new ScenarioError(path, [{ field: "", message: `cannot read: ${(e as Error).message}` }]);
  }
}

type Logger = ((line: string) => void) & { close?: () => void };

function makeLogger(log: boolean | string | undefined): Logger | undefined {
  if (!log) return undefined;
  const enc = new TextEncoder();
  if (log === true) {
    return (line: string) =>
      Deno.stderr.writeSync(enc.encode(`${new Date().toISOString()} ${line}\n`));
  }
  const file = Deno.openSync(log, { append: true, create: true });
  const fn: Logger = (line: string) =>
    file.writeSync(enc.encode(`${new Date().toISOString()} ${line}\n`));
  fn.close = () => file.close();
  return fn;
}
