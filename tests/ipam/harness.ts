/**
 * Test harness for the IPAM daemon: a simulated VPC (aws/sim, real SDK over HTTP), the
 * daemon in-process or as a `vpcni serve` child process, and a raw protocol client over
 * its unix socket.
 *
 * @module
 */
import { type ScenarioInput, type SimServer, startSim } from "../../aws/sim/mod.ts";
import type { IpamAddRequest, IpamRequest, IpamResponse } from "../../proto/ipam.ts";
import { IPAM_PATH } from "../../proto/ipam.ts";
import { resolveConfig } from "../../ipam/config.ts";
import { createAwsCloud } from "../../ipam/aws_cloud.ts";
import { type RunningDaemon, startDaemon, type StartOptions } from "../../ipam/daemon.ts";
import { TAG_CLUSTER, TAG_INSTANCE } from "../../base/eni_tags.ts";
import { setupLogging } from "../../ipam/log.ts";

// VPCNI_TEST_LOG=debug|info|… shows the in-process daemon's JSON log lines.
const testLog = Deno.env.get("VPCNI_TEST_LOG");
if (testLog) await setupLogging(testLog as "debug");

// The SDK's default credential chain reads these; the simulator accepts any static key.
Deno.env.set("AWS_ACCESS_KEY_ID", "test");
Deno.env.set("AWS_SECRET_ACCESS_KEY", "test");

/** The instance every scenario here runs on. */
export const INSTANCE = "i-0aaaaaaaaaaaaaaa1";
/** Subnet ids of the standard scenario. */
export const SUBNETS = {
  node: "subnet-0a000001",
  internalA: "subnet-0a000002",
  internalB: "subnet-0a000003",
  tiny: "subnet-0a000004",
  otherAz: "subnet-0b000001",
  dmz: "subnet-0a000005",
};

/** A one-node VPC: the node subnet, two "internal" subnets, a tiny one, a DMZ, another AZ. */
export function standardScenario(
  o: { type?: string; maxEnis?: number; ipv4PerEni?: number } = {},
): ScenarioInput {
  // The daemon takes a known type's limits from its embedded table, not from EC2: limits of
  // the scenario's own need a type the table lacks (EC2 is asked for it).
  const type = o.type ?? (o.maxEnis !== undefined ? "vt.custom" : "m5.xlarge");
  return {
    region: "us-east-1",
    vpc: { id: "vpc-0a000001", cidrs: ["10.0.0.0/16"] },
    subnets: [
      { id: SUBNETS.node, cidr: "10.0.0.0/20", az: "us-east-1a", tags: { zone: "node" } },
      {
        id: SUBNETS.internalA,
        cidr: "10.0.16.0/24",
        az: "us-east-1a",
        tags: { zone: "internal", tier: "pods" },
      },
      {
        id: SUBNETS.internalB,
        cidr: "10.0.17.0/24",
        az: "us-east-1a",
        tags: { zone: "internal", tier: "pods" },
      },
      { id: SUBNETS.tiny, cidr: "10.0.18.0/28", az: "us-east-1a", tags: { zone: "tiny" } },
      { id: SUBNETS.dmz, cidr: "10.0.19.0/24", az: "us-east-1a", tags: { zone: "dmz" } },
      {
        id: SUBNETS.otherAz,
        cidr: "10.0.32.0/24",
        az: "us-east-1b",
        tags: { zone: "internal", tier: "pods" },
      },
    ],
    securityGroups: [
      { id: "sg-0a000001", name: "node", tags: { role: "node" } },
      { id: "sg-0a000002", name: "pods", tags: { role: "pods" } },
    ],
    instances: [{
      id: INSTANCE,
      type,
      subnet: SUBNETS.node,
      securityGroups: ["sg-0a000001"],
      az: "us-east-1a",
    }],
    instanceTypes: o.maxEnis ? [{ type, maxEnis: o.maxEnis, ipv4PerEni: o.ipv4PerEni ?? 4 }] : [],
  };
}

/** A temp dir holding state and the socket; removed by `cleanup`. */
export async function tempRoot(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "vip-ipam-" });
}

/** The daemon config for a test: paths under `root`, introspection on a free port. */
export function testConfig(root: string, extra: Record<string, unknown> = {}) {
  return resolveConfig(
    {
      clusterName: "test-cluster",
      socketPath: `${root}/ipam.sock`,
      stateDir: `${root}/state`,
      listen: "127.0.0.1:0",
      reconcileIntervalSeconds: 0.2,
      releaseDelaySeconds: 1,
      leakedEniGraceSeconds: 0,
      startJitterSeconds: 0,
      ec2ResyncSeconds: 1,
      addTimeoutSeconds: 20,
      // A kubelet on the test machine must not see these daemons; device-plugin tests opt in.
      devicePlugin: "off",
      ...extra,
    },
    {},
    {},
  );
}

/** A simulator plus a daemon running in this process. */
export interface Stack {
  sim: SimServer;
  daemon: RunningDaemon;
  root: string;
  call(req: IpamRequest | Record<string, unknown>): Promise<IpamResponse>;
  metrics(): Promise<string>;
  introspect<T = unknown>(path: string): Promise<T>;
  close(): Promise<void>;
}

/** MACs of the ENIs attached to the test's instance now, in the simulator. */
export function nodeEniMacs(stack: Stack): string[] {
  return [...stack.sim.state.enis.values()]
    .filter((e) => e.attachment?.instanceId === INSTANCE)
    .map((e) => e.mac);
}

/** Fast retries for tests: the simulator answers at once, waiting 1 s per retry is waste. */
export const FAST_RETRY = { retry: { baseDelayMs: 20, maxDelayMs: 200 } };

/** Starts the daemon in-process against a running simulator. */
export async function startDaemonOn(
  sim: SimServer,
  root: string,
  extra: Record<string, unknown> = {},
  random?: () => number,
  daemonOptions: Omit<StartOptions, "random"> = {},
): Promise<RunningDaemon> {
  const cfg = testConfig(root, extra);
  const cloud = await createAwsCloud({
    ec2Endpoint: sim.ec2Endpoint,
    imdsEndpoint: sim.imdsEndpointFor(INSTANCE),
    ec2: FAST_RETRY as never,
  });
  return await startDaemon(cfg, cloud, { random, ...daemonOptions });
}

/** Starts sim + in-process daemon. */
export async function startStack(
  scenario: ScenarioInput,
  extra: Record<string, unknown> = {},
  o: { random?: () => number; imdsSettleMs?: number } = {},
): Promise<Stack> {
  const sim = await startSim({ scenario });
  const root = await tempRoot();
  let daemon: RunningDaemon;
  try {
    daemon = await startDaemonOn(sim, root, extra, o.random, { imdsSettleMs: o.imdsSettleMs });
  } catch (e) {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
    throw e;
  }
  const socket = `${root}/ipam.sock`;
  const base = () => `http://127.0.0.1:${daemon.introspectionAddr.port}`;
  const client = ipamClient(socket);
  return {
    sim,
    daemon,
    root,
    call: client.call,
    metrics: () => fetch(`${base()}/metrics`).then((r) => r.text()),
    introspect: (path) => fetch(`${base()}${path}`).then((r) => r.json()),
    async close() {
      client.close();
      await daemon.stop();
      await sim.close();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    },
  };
}

/**
 * A raw protocol client over the unix socket: plain HTTP/1.1 with `Connection: close` on
 * `Deno.connect`. (fetch's unix-socket client stalls for seconds on its first request after
 * the daemon it talked to was killed; a daemon test must not measure that.)
 */
export function ipamClient(socket: string, signal?: AbortSignal) {
  return {
    async call(req: IpamRequest | Record<string, unknown>): Promise<IpamResponse> {
      signal?.throwIfAborted();
      const conn = await Deno.connect({ transport: "unix", path: socket });
      const onAbort = () => conn.close();
      signal?.addEventListener("abort", onAbort);
      try {
        const body = new TextEncoder().encode(JSON.stringify({ version: 1, ...req }));
        const head =
          `POST ${IPAM_PATH} HTTP/1.1\r\nHost: daemon\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
        const msg = new Uint8Array([...new TextEncoder().encode(head), ...body]);
        for (let off = 0; off < msg.length;) off += await conn.write(msg.subarray(off));
        const chunks: Uint8Array[] = [];
        const buf = new Uint8Array(65536);
        for (;;) {
          const n = await conn.read(buf);
          if (n === null) break;
          chunks.push(buf.slice(0, n));
        }
        const text = new TextDecoder().decode(new Uint8Array(chunks.flatMap((c) => [...c])));
        const split = text.indexOf("\r\n\r\n");
        if (split < 0) throw new Error(`no HTTP answer from ${socket}`);
        const headers = text.slice(0, split).toLowerCase();
        let payload = text.slice(split + 4);
        if (headers.includes("transfer-encoding: chunked")) payload = dechunk(payload);
        return JSON.parse(payload);
      } finally {
        signal?.removeEventListener("abort", onAbort);
        try {
          conn.close();
        } catch { /* closed by abort */ }
      }
    },
    close: () => {},
  };
}

function dechunk(s: string): string {
  let out = "";
  let i = 0;
  for (;;) {
    const eol = s.indexOf("\r\n", i);
    const size = parseInt(s.slice(i, eol), 16);
    if (!size) return out;
    out += s.slice(eol + 2, eol + 2 + size);
    i = eol + 2 + size + 2;
  }
}

/** An ADD request for pod `name`. */
export function addReq(name: string, annotations?: Record<string, string>): IpamAddRequest {
  return {
    version: 1,
    op: "add",
    network: "vpcni",
    containerId: `c-${name}`,
    ifName: "eth0",
    netns: `/var/run/netns/none-${name}`,
    podNamespace: "default",
    podName: name,
    ...(annotations ? { annotations } : {}),
  };
}

/** A DEL request for pod `name`. */
export function delReq(name: string): IpamRequest {
  return { version: 1, op: "del", network: "vpcni", containerId: `c-${name}`, ifName: "eth0" };
}

/** Reads one sample of a Prometheus metric from /metrics text; 0 when absent. */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number {
  let sum = 0;
  let found = false;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (!ok) continue;
    sum += Number(line.slice(line.lastIndexOf(" ") + 1));
    found = true;
  }
  return found ? sum : 0;
}

/** ENIs of the sim attached to the instance, with their secondary IPs. */
export function simNodeEnis(sim: SimServer) {
  return [...sim.state.enis.values()]
    .filter((e) => e.attachment?.instanceId === INSTANCE)
    .map((e) => ({
      id: e.id,
      subnetId: e.subnetId,
      deviceIndex: e.attachment!.deviceIndex,
      ips: e.privateIps.filter((p) => !p.primary).map((p) => p.address),
      tags: Object.fromEntries(e.tags),
    }));
}

/** ENIs carrying our cluster+instance tags that are not attached: leaks, unless in flight. */
export function simDetachedOurs(sim: SimServer, cluster = "test-cluster") {
  return [...sim.state.enis.values()].filter((e) =>
    e.tags.get(TAG_CLUSTER) === cluster && e.tags.get(TAG_INSTANCE) === INSTANCE &&
    !e.attachment
  );
}

/** Polls `fn` until it returns true or `ms` pass; returns the last result. */
export async function eventually(
  fn: () => boolean | Promise<boolean>,
  ms: number,
): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await fn()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return await fn();
}

/** Whether `ip` lies inside `cidr`. */
export function inCidr(ip: string, cidr: string): boolean {
  const toInt = (a: string) => a.split(".").reduce((n, o) => ((n << 8) | Number(o)) >>> 0, 0);
  const [base, len] = cidr.split("/");
  const mask = Number(len) === 0 ? 0 : (0xffffffff << (32 - Number(len))) >>> 0;
  return ((toInt(ip) & mask) >>> 0) === ((toInt(base) & mask) >>> 0);
}
