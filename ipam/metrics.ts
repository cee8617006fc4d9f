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
  releasedGone: Counter<"pool" | "reason">;
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

/** One metric as the README's metrics table describes it. */
export interface MetricDoc {
  /** The metric's name, as /metrics shows it. */
  name: string;
  /** Its label names, in the order the metric declares them. */
  labels: string[];
  /** What it counts or measures, for a reader of the README. */
  doc: string;
}

/**
 * Every metric the daemon exports, as the README's metrics table shows it: written there by
 * tools/gen_knob_tables.ts, and held by ipam/metrics_test.ts to the metrics
 * {@linkcode createMetrics} registers (no row without a metric, no metric without a row).
 */
export const METRIC_DOCS: readonly MetricDoc[] = [
  {
    name: "vpcni_pool_ips",
    labels: ["pool", "state"],
    doc: "addresses held by a pool; state = total | used | free | cooling",
  },
  { name: "vpcni_pool_enis", labels: ["pool"], doc: "ENIs a pool holds" },
  {
    name: "vpcni_pool_exhausted",
    labels: ["pool", "reason"],
    doc: "1 while the pool cannot grow; reason = subnet_full | eni_limit",
  },
  {
    name: "vpcni_pool_exhausted_total",
    labels: ["pool", "reason"],
    doc: "times growth was refused for that reason",
  },
  {
    name: "vpcni_ipam_adds_total",
    labels: ["pool", "result"],
    doc: "ADDs; result = fast | waited | duplicate | no_ip",
  },
  { name: "vpcni_ipam_dels_total", labels: ["pool"], doc: "DELs that released an address" },
  {
    name: "vpcni_ipam_released_gone_total",
    labels: ["pool", "reason"],
    doc: "reservations freed without a DEL; reason = del-while-down | pod-gone",
  },
  {
    name: "vpcni_ipam_add_wait_seconds",
    labels: ["pool"],
    doc: "histogram of how long ADDs waited for the pool to grow",
  },
  {
    name: "vpcni_ec2_calls_total",
    labels: ["action"],
    doc: "EC2 API calls made, by action (retries included)",
  },
  {
    name: "vpcni_ec2_errors_total",
    labels: ["action", "code"],
    doc: "EC2 errors by action and AWS error code",
  },
  {
    name: "vpcni_ec2_throttles_total",
    labels: [],
    doc: "EC2 answers with a throttling code (RequestLimitExceeded and kin)",
  },
  { name: "vpcni_enis_created_total", labels: ["pool"], doc: "ENIs created and attached" },
  {
    name: "vpcni_enis_deleted_total",
    labels: ["reason"],
    doc: "ENIs deleted; reason = surplus | leaked | failed_attach",
  },
  {
    name: "vpcni_ips_assigned_total",
    labels: ["pool"],
    doc: "secondary addresses assigned to ENIs",
  },
  {
    name: "vpcni_ips_unassigned_total",
    labels: ["pool"],
    doc: "secondary addresses given back to EC2",
  },
  { name: "vpcni_checkpoint_writes_total", labels: [], doc: "atomic checkpoint writes" },
  {
    name: "vpcni_pool_grow_failures_total",
    labels: ["pool", "code"],
    doc: "failed growth attempts by AWS error code",
  },
  {
    name: "vpcni_daemon_memory_bytes",
    labels: ["kind"],
    doc: "the daemon's memory: kind = rss | heap_used | heap_total",
  },
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
    releasedGone: new Counter({
      name: "vpcni_ipam_released_gone_total",
      help: "reservations released whose DEL did not reach the daemon, by reason",
      labelNames: ["pool", "reason"],
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
