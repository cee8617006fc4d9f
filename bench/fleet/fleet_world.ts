/**
 * The world of the fleet bench: one simulated account with N instances, and the two sides
 * that run a node on it — vpcni's node core (ipam/node_core.ts) and the AWS VPC CNI's
 * WARM_ENI_TARGET=1 policy (bench/ipam/aws_cni_baseline.ts) — behind one interface.
 *
 * Time is scaled as in bench/ipam: every AWS duration (latencies, attach delay, bucket
 * refills on both the account's and the clients' side, retry backoff, the daemon's periods
 * and cooldowns) is multiplied by `scale`, and measured waits are divided by it.
 *
 * @module
 */
import { type ScenarioInput, type SimServer, startSim } from "../../aws/sim/mod.ts";
import { AWS_ACCOUNT_BUCKETS } from "../../aws/sim/faults.ts";
import { DEFAULT_BUCKETS } from "../../aws/ec2.ts";
import type { BucketConfig } from "../../aws/throttle.ts";
import { createAwsCloud } from "../../ipam/aws_cloud.ts";
import { resolveConfig } from "../../ipam/config.ts";
import { type NodeCore, startNodeCore } from "../../ipam/node_core.ts";
import { IMDS_SETTLE_MS } from "../../ipam/imds_check.ts";
import { addReq, delReq } from "../../tests/ipam/harness.ts";
import { addWaitMs } from "../../ipam/pools.ts";
import { DEFAULT_ADD_TIMEOUT_MS } from "../../proto/ipam.ts";
import { AwsCniWarmEniBaseline } from "../ipam/aws_cni_baseline.ts";

/** Instance type of every node: 4 ENIs × 15 addresses, prefix delegation capable (Nitro). */
export const NODE_TYPE = "m5.xlarge";
/** Node subnets (the nodes are spread over them, as over a cluster's node groups). */
const SUBNET_COUNT = 8;

/** The instance id of node `i`. */
export function instanceId(i: number): string {
  return `i-0f${i.toString(16).padStart(15, "0")}`;
}

/** Addresses a launch template gives each node's primary ENI at RunInstances. */
export interface LaunchAddresses {
  /** SecondaryPrivateIpAddressCount. */
  secondaryIps?: number;
  /** Ipv4PrefixCount. */
  prefixes?: number;
}

/**
 * A VPC 10.0.0.0/16 cut into 8 /19 node subnets, and `n` m5.xlarge instances over them, each
 * launched with `launch`'s addresses on its primary ENI.
 */
export function fleetScenario(n: number, launch: LaunchAddresses = {}): ScenarioInput {
  const subnets = [...Array(SUBNET_COUNT)].map((_, k) => ({
    id: `subnet-0f${k.toString(16).padStart(6, "0")}`,
    cidr: `10.0.${k * 32}.0/19`,
    az: "us-east-1a",
    tags: {},
  }));
  return {
    region: "us-east-1",
    vpc: { id: "vpc-0f000001", cidrs: ["10.0.0.0/16"] },
    subnets,
    securityGroups: [{ id: "sg-0f000001", name: "nodes" }],
    instances: [...Array(n)].map((_, i) => ({
      id: instanceId(i),
      type: NODE_TYPE,
      subnet: subnets[i % SUBNET_COUNT].id,
      securityGroups: ["sg-0f000001"],
      az: "us-east-1a",
      ...launch,
    })),
  };
}

/**
 * Starts the simulator for `n` nodes with AWS-like latencies and the account's buckets. With
 * `accountShare` below 1 every account bucket (burst and refill) is that fraction of EC2's, so
 * that 100 nodes on a tenth of the account meet the contention of 1,000 on all of it.
 */
export async function startFleetSim(
  n: number,
  scale: number,
  errorRate = 0,
  launch: LaunchAddresses = {},
  accountShare = 1,
): Promise<SimServer> {
  const t0 = performance.now();
  const sim = await startSim({
    scenario: fleetScenario(n, launch),
    // The account's buckets refill on AWS time.
    clock: () => (performance.now() - t0) / scale,
  });
  sim.faults.accountLimits = true;
  if (accountShare !== 1) {
    const part = (b: { capacity: number; refillPerSecond: number }) => ({
      capacity: Math.max(1, Math.round(b.capacity * accountShare)),
      refillPerSecond: b.refillPerSecond * accountShare,
    });
    // The same buckets, smaller: `throttle` with per-category and per-action specs.
    sim.faults.accountLimits = false;
    sim.faults.throttle = true;
    sim.faults.buckets = {
      nonMutating: part(AWS_ACCOUNT_BUCKETS.categories.nonMutating),
      unfilteredNonMutating: part(AWS_ACCOUNT_BUCKETS.categories.unfilteredNonMutating),
      mutating: part(AWS_ACCOUNT_BUCKETS.categories.mutating),
    };
    sim.faults.actionBuckets = Object.fromEntries(
      Object.entries(AWS_ACCOUNT_BUCKETS.actions).map(([a, b]) => [a, part(b)]),
    );
  }
  sim.faults.errorRate = errorRate;
  sim.faults.latencyMs = {
    default: 50 * scale,
    CreateNetworkInterface: 1000 * scale,
    AttachNetworkInterface: 500 * scale,
    AssignPrivateIpAddresses: 300 * scale,
    UnassignPrivateIpAddresses: 300 * scale,
  };
  sim.faults.attachDelayMs = 3000 * scale;
  return sim;
}

/** The client-side buckets at EC2's numbers, refilling on AWS time. */
function scaledBuckets(scale: number): Partial<BucketConfig> {
  const s = (b: { capacity: number; refillPerSecond: number }) => ({
    capacity: b.capacity,
    refillPerSecond: b.refillPerSecond / scale,
  });
  return {
    nonMutating: s(DEFAULT_BUCKETS.nonMutating),
    unfilteredNonMutating: s(DEFAULT_BUCKETS.unfilteredNonMutating),
    mutating: s(DEFAULT_BUCKETS.mutating),
    actions: Object.fromEntries(
      Object.entries(DEFAULT_BUCKETS.actions).map(([a, b]) => [a, s(b)]),
    ),
  };
}

/** One running node of either side. */
export interface FleetNode {
  /** ADD of pod `pod`: resolves to whether it got an address (false: CNI code 11). */
  add(pod: string): Promise<boolean>;
  del(pod: string): Promise<void>;
  /** Whether the node's pool holds its warm target (or cannot grow further). */
  atWarmTarget(): boolean;
  /** Pods holding an address on this node. */
  pods(): string[];
  /** vpcni only: the daemon's counters of deleted ENIs by reason and failed growths by code. */
  counters?(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

/** How a side starts a node; `previous` is the same node before a restart. */
export interface FleetSide {
  name: string;
  startNode(sim: SimServer, i: number, previous?: FleetNode): Promise<FleetNode>;
}

/** Settings shared by both sides. */
export interface SideOptions {
  scale: number;
  /** ADD timeout in AWS seconds (the daemon's addTimeoutSeconds; the baseline gets the same). */
  addTimeoutSeconds: number;
}

function cloudFor(sim: SimServer, i: number, scale: number) {
  return createAwsCloud({
    ec2Endpoint: sim.ec2Endpoint,
    imdsEndpoint: sim.imdsEndpointFor(instanceId(i)),
    // A node's IMDS answers in milliseconds; here a thousand of them share one loaded process,
    // whose late answers would otherwise fail daemon starts that a real node never sees.
    imds: { timeoutMs: 20_000, attemptTimeoutMs: 5_000 },
    ec2: {
      credentials: { accessKeyId: "fleet", secretAccessKey: "fleet" },
      buckets: scaledBuckets(scale),
      retry: { baseDelayMs: 200 * scale, maxDelayMs: 10_000 * scale, deadlineMs: 30_000 * scale },
      consistencyWindowMs: 10_000 * scale,
    },
  });
}

/**
 * vpcni: the node core with the daemon's defaults (one pool, warmEnis 1), periods scaled;
 * `startJitterSeconds` is the daemon's knob (its default when absent).
 */
export function vpcniSide(
  root: string,
  o: SideOptions & { pool?: Record<string, unknown>; startJitterSeconds?: number },
): FleetSide {
  const S = o.scale;
  return {
    name: "vpcni",
    async startNode(sim, i, previous) {
      const dir = `${root}/node-${i}`;
      const cfg = resolveConfig(
        {
          clusterName: "fleet",
          socketPath: `${dir}/ipam.sock`,
          stateDir: `${dir}/state`,
          listen: "127.0.0.1:0",
          reconcileIntervalSeconds: 5 * S,
          releaseDelaySeconds: 60 * S,
          imdsCheckSeconds: 60 * S,
          ec2ResyncSeconds: 600 * S,
          leakedEniGraceSeconds: 300 * S,
          addTimeoutSeconds: o.addTimeoutSeconds * S,
          ...(o.startJitterSeconds === undefined
            ? {}
            : { startJitterSeconds: o.startJitterSeconds * S }),
          // A whole number of seconds, as the knob demands.
          pools: [{
            name: "default",
            ipCooldownSeconds: Math.max(1, Math.round(30 * S)),
            ...o.pool,
          }],
        },
        {},
        {},
      );
      const live = previous ? new Set(previous.pods()) : new Set<string>();
      const core: NodeCore = await startNodeCore(cfg, () => cloudFor(sim, i, S), {
        imdsSettleMs: IMDS_SETTLE_MS * S,
        timeScale: S,
      });
      // As on a containerd 2.x node: pods come once CNI STATUS says the network is ready,
      // which a warm pool says after its first addresses (the baseline's start waits for its
      // first addresses too, as ipamd's init does before aws-node is ready).
      while (!core.daemon.pools.status().ok) {
        await new Promise((r) => setTimeout(r, 1000 * S));
      }
      const view = core.daemon.pools.view;
      return {
        async add(pod) {
          // As the installed plugin sends it: its ADD bound, which caps the daemon's wait.
          const r = await core.request({
            ...addReq(pod),
            waitMs: Math.round(DEFAULT_ADD_TIMEOUT_MS * S),
          });
          if (r.ok) live.add(pod);
          return r.ok;
        },
        async del(pod) {
          live.delete(pod);
          await core.request(delReq(pod));
        },
        atWarmTarget: () =>
          view.warm("default").shortfall <= 0 || !!view.growth("default").exhausted,
        pods: () => [...live],
        async counters() {
          const out: Record<string, number> = {};
          const m = core.daemon.metrics;
          for (const v of (await m.enisDeleted.get()).values) {
            out[`ENI deleted: ${v.labels.reason}`] = v.value;
          }
          for (const v of (await m.growFailures.get()).values) {
            out[`growth failed: ${v.labels.code}`] = v.value;
          }
          return out;
        },
        stop: () => core.stop(),
      };
    },
  };
}

/** The AWS VPC CNI's WARM_ENI_TARGET=1 policy, through the same clients. */
export function baselineSide(o: SideOptions): FleetSide {
  return {
    name: "aws-cni WARM_ENI_TARGET=1",
    async startNode(sim, i, previous) {
      const cloud = await cloudFor(sim, i, o.scale);
      const peer = new AwsCniWarmEniBaseline(cloud, o.scale);
      const ips = new Map<string, string>();
      const before = previous as (FleetNode & { ips: Map<string, string> }) | undefined;
      for (const [pod, ip] of before?.ips ?? []) ips.set(pod, ip);
      await peer.start({ used: ips.values() });
      const node: FleetNode & { ips: Map<string, string> } = {
        ips,
        async add(pod) {
          try {
            // The same bound as vpcni's pods get: the kubelet's runtime waits no longer.
            const r = await peer.add(
              addWaitMs(o.addTimeoutSeconds, DEFAULT_ADD_TIMEOUT_MS) * o.scale,
            );
            ips.set(pod, r.ip);
            return true;
          } catch {
            return false;
          }
        },
        del(pod) {
          const ip = ips.get(pod);
          ips.delete(pod);
          if (ip) peer.del(ip);
          return Promise.resolve();
        },
        atWarmTarget: () => peer.atWarmTarget(),
        pods: () => [...ips.keys()],
        stop() {
          peer.stop();
          cloud.close();
          return Promise.resolve();
        },
      };
      return node;
    },
  };
}
