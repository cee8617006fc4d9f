/**
 * The simulator's control endpoints, under `/_sim/` on the EC2 port, for a sim running in
 * another process (`vpcni sim`): read the world and the counters, and change faults live.
 *
 * - `GET /_sim/state`  — the world as JSON (subnets, instances, ENIs with IPs and prefixes)
 * - `GET /_sim/stats`  — request counters
 * - `GET /_sim/faults` — the fault config; `PATCH /_sim/faults` merges a partial one (the
 *   scenario's `faults` schema; a bad body is a 400 naming the field, and changes nothing)
 *
 * @module
 */
import { FaultsSchema } from "./scenario.ts";
import type { FaultConfig } from "./faults.ts";
import type { SimState } from "./state.ts";
import { formatIpv4Cidr } from "../../base/ipv4.ts";

/** Counters the server keeps (see `SimStats` in mod.ts). */
export interface ControlStats {
  ec2: Map<string, number>;
  errors: Map<string, number>;
  imds: Map<string, number>;
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body, null, 2) + "\n", {
    status,
    headers: { "content-type": "application/json" },
  });
}

/** The world as plain JSON. */
export function stateJson(s: SimState): unknown {
  return {
    region: s.region,
    accountId: s.accountId,
    vpc: { id: s.vpc.id, cidrs: s.vpc.cidrs, tags: Object.fromEntries(s.vpc.tags) },
    subnets: [...s.subnets.values()].map((x) => ({
      id: x.id,
      cidr: formatIpv4Cidr(x.cidr),
      az: x.az,
      availableIps: s.availableIps(x),
      tags: Object.fromEntries(x.tags),
    })),
    securityGroups: [...s.securityGroups.values()].map((g) => ({ id: g.id, name: g.name })),
    instances: [...s.instances.values()].map((i) => ({
      id: i.id,
      type: i.limits.type,
      az: i.az,
      maxEnis: i.limits.maxEnis,
      ipv4PerEni: i.limits.ipv4PerEni,
      enis: s.enisOf(i.id).map((e) => e.id),
    })),
    networkInterfaces: [...s.enis.values()].map((e) => ({
      id: e.id,
      subnetId: e.subnetId,
      mac: e.mac,
      description: e.description,
      groupIds: e.groupIds,
      attachment: e.attachment
        ? {
          id: e.attachment.id,
          instanceId: e.attachment.instanceId,
          deviceIndex: e.attachment.deviceIndex,
          status: e.attachment.status,
        }
        : null,
      privateIps: e.privateIps.map((x) => x.address),
      prefixes: e.prefixes.map((p) => p.cidr),
      tags: Object.fromEntries(e.tags),
    })),
  };
}

/** Answers a `/_sim/…` request, or undefined when the path is not a control path. */
export async function handleControl(
  req: Request,
  path: string,
  state: SimState,
  faults: FaultConfig,
  stats: ControlStats,
): Promise<Response | undefined> {
  if (path === "/_sim/state" && req.method === "GET") return json(stateJson(state));
  if (path === "/_sim/stats" && req.method === "GET") {
    return json({
      ec2: Object.fromEntries(stats.ec2),
      errors: Object.fromEntries(stats.errors),
      imds: Object.fromEntries(stats.imds),
    });
  }
  if (path !== "/_sim/faults") {
    return path.startsWith("/_sim/") ? json({ error: "not found" }, 404) : undefined;
  }
  if (req.method === "GET") return json(faults);
  if (req.method !== "PATCH" && req.method !== "PUT") {
    return json({ error: "use GET or PATCH" }, 405);
  }
  let body: unknown;
  try {
    body = await req.json();
  } catch (e) {
    return json({ error: `the body is not JSON: ${(e as Error).message}` }, 400);
  }
  const parsed = FaultsSchema.safeParse(body);
  if (!parsed.success) {
    return json({
      error: "invalid faults",
      issues: parsed.error.issues.map((i) => ({ field: i.path.join("."), message: i.message })),
    }, 400);
  }
  const f = parsed.data;
  if (f.throttle !== undefined) faults.throttle = f.throttle;
  if (f.accountLimits !== undefined) faults.accountLimits = f.accountLimits;
  if (f.buckets) Object.assign(faults.buckets, f.buckets);
  if (f.actionBuckets) Object.assign(faults.actionBuckets, f.actionBuckets);
  if (f.throttleProbability !== undefined) faults.throttleProbability = f.throttleProbability;
  if (f.errorRate !== undefined) faults.errorRate = f.errorRate;
  if (f.latencyMs) Object.assign(faults.latencyMs, f.latencyMs);
  if (f.consistencyDelayMs !== undefined) faults.consistencyDelayMs = f.consistencyDelayMs;
  if (f.attachDelayMs !== undefined) faults.attachDelayMs = f.attachDelayMs;
  if (f.imdsDelayMs !== undefined) faults.imdsDelayMs = f.imdsDelayMs;
  return json(faults);
}
