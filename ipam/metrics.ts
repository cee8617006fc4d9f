/**
 * Prometheus metrics of the daemon (prom-client, one registry per daemon so tests can run
 * several). Pool gauges and the EC2 counters are filled at scrape time from the live state:
 * the EC2 client counts every call itself, so its counters are copied, not incremented.
 *
 * @module
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";

/** Every metric the daemon exports. */
export interface DaemonMetrics {
  registry: Registry;
  poolIps: Gauge<"pool" | "state">;
  poolEnis: Gauge<"pool">;
  poolExhausted: Gauge<"pool" | "reason">;
  exhaustedTotal: Counter<"pool" | "reason">;
  adds: Counter<"pool" | "result">;
  dels: Counter<"pool">;
  addWait: Histogram<"pool">;
  ec2Calls: Counter<"action">;
  ec2Errors: Counter<"action" | "code">;
  ec2Throttles: Counter;
  enisCreated: Counter<"pool">;
  enisDeleted: Counter<"reason">;
  ipsAssigned: Counter<"pool">;
  ipsUnassigned: Counter<"pool">;
  checkpointWrites: Counter;
  growFailures: Counter<"pool" | "code">;
  memory: Gauge<"kind">;
}

/** Names and help of each metric, for the README. */
export const METRIC_DOCS: [string, string][] = [
  ["vpcni_pool_ips{pool,state}", "addresses held by a pool; state = total | used | free | cooling"],
  ["vpcni_pool_enis{pool}", "ENIs a pool holds"],
  [
    "vpcni_pool_exhausted{pool,reason}",
    "1 while the pool cannot grow; reason = subnet_full | eni_limit",
  ],
  ["vpcni_pool_exhausted_total{pool,reason}", "times growth was refused for that reason"],
  [
    "vpcni_ipam_adds_total{pool,result}",
    "ADDs; result = fast | waited | duplicate | no_ip",
  ],
  ["vpcni_ipam_dels_total{pool}", "DELs that released an address"],
  ["vpcni_ipam_add_wait_seconds{pool}", "histogram of how long ADDs waited for the pool to grow"],
  ["vpcni_ec2_calls_total{action}", "EC2 API calls made, by action (retries included)"],
  ["vpcni_ec2_errors_total{action,code}", "EC2 errors by action and AWS error code"],
  [
    "vpcni_ec2_throttles_total",
    "EC2 answers with a throttling code (RequestLimitExceeded and kin)",
  ],
  ["vpcni_enis_created_total{pool}", "ENIs created and attached"],
  ["vpcni_enis_deleted_total{reason}", "ENIs deleted; reason = surplus | leaked | failed_attach"],
  ["vpcni_ips_assigned_total{pool}", "secondary addresses assigned to ENIs"],
  ["vpcni_ips_unassigned_total{pool}", "secondary addresses given back to EC2"],
  ["vpcni_checkpoint_writes_total", "atomic checkpoint writes"],
  ["vpcni_pool_grow_failures_total{pool,code}", "failed growth attempts by AWS error code"],
  ["vpcni_daemon_memory_bytes{kind}", "the daemon's memory: kind = rss | heap_used | heap_total"],
];

/** Creates the registry and every metric. */
export function createMetrics(): DaemonMetrics {
  const registry = new Registry();
  const r = [registry];
  return {
    registry,
    poolIps: new Gauge({
      name: "vpcni_pool_ips",
      help: "addresses held by a pool",
      labelNames: ["pool", "state"],
      registers: r,
    }),
    poolEnis: new Gauge({
      name: "vpcni_pool_enis",
      help: "ENIs a pool holds",
      labelNames: ["pool"],
      registers: r,
    }),
    poolExhausted: new Gauge({
      name: "vpcni_pool_exhausted",
      help: "1 while the pool cannot grow, by reason (subnet_full, eni_limit)",
      labelNames: ["pool", "reason"],
      registers: r,
    }),
    exhaustedTotal: new Counter({
      name: "vpcni_pool_exhausted_total",
      help: "times growth was refused, by reason",
      labelNames: ["pool", "reason"],
      registers: r,
    }),
    adds: new Counter({
      name: "vpcni_ipam_adds_total",
      help: "ADDs by result",
      labelNames: ["pool", "result"],
      registers: r,
    }),
    dels: new Counter({
      name: "vpcni_ipam_dels_total",
      help: "DELs that released an address",
      labelNames: ["pool"],
      registers: r,
    }),
    addWait: new Histogram({
      name: "vpcni_ipam_add_wait_seconds",
      help: "how long ADDs waited for the pool to grow",
      labelNames: ["pool"],
      buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30],
      registers: r,
    }),
    ec2Calls: new Counter({
      name: "vpcni_ec2_calls_total",
      help: "EC2 API calls by action",
      labelNames: ["action"],
      registers: r,
    }),
    ec2Errors: new Counter({
      name: "vpcni_ec2_errors_total",
      help: "EC2 errors by action and code",
      labelNames: ["action", "code"],
      registers: r,
    }),
    ec2Throttles: new Counter({
      name: "vpcni_ec2_throttles_total",
      help: "EC2 throttles",
      registers: r,
    }),
    enisCreated: new Counter({
      name: "vpcni_enis_created_total",
      help: "ENIs created",
      labelNames: ["pool"],
      registers: r,
    }),
    enisDeleted: new Counter({
      name: "vpcni_enis_deleted_total",
      help: "ENIs deleted",
      labelNames: ["reason"],
      registers: r,
    }),
    ipsAssigned: new Counter({
      name: "vpcni_ips_assigned_total",
      help: "addresses assigned",
      labelNames: ["pool"],
      registers: r,
    }),
    ipsUnassigned: new Counter({
      name: "vpcni_ips_unassigned_total",
      help: "addresses unassigned",
      labelNames: ["pool"],
      registers: r,
    }),
    checkpointWrites: new Counter({
      name: "vpcni_checkpoint_writes_total",
      help: "checkpoint writes",
      registers: r,
    }),
    memory: new Gauge({
      name: "vpcni_daemon_memory_bytes",
      help: "daemon memory (rss, heap_used, heap_total)",
      labelNames: ["kind"],
      registers: r,
    }),
    growFailures: new Counter({
      name: "vpcni_pool_grow_failures_total",
      help: "failed growth attempts",
      labelNames: ["pool", "code"],
      registers: r,
    }),
  };
}
