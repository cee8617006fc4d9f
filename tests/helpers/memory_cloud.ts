/**
 * A small in-memory EC2 and IMDS for one node (ipam/cloud.ts's `CloudApi`), so the pool
 * decisions can be tested in milliseconds: every call is counted, attaches and detaches
 * complete at once, each subnet hands out addresses from its /24, and a call can be made to
 * fail with an AWS error code. It is a stand-in for the simulator (aws/sim/) where only the
 * daemon's choices are under test, not the SDK or the wire.
 *
 * @module
 */
import type {
  CloudApi,
  EniDescription,
  NodeMetadata,
  SecurityGroupInfo,
  SubnetInfo,
} from "../../ipam/cloud.ts";
import { IPAM_PROTOCOL_VERSION, type IpamAddRequest } from "../../proto/ipam.ts";
import type { Checkpoint } from "../../ipam/checkpoint.ts";
import { configSchema } from "../../ipam/config.ts";
import type { KernelView } from "../../ipam/kernel_view.ts";
import { createMetrics } from "../../ipam/metrics.ts";
import { attachmentKey, type NodeState } from "../../ipam/node_state.ts";
import { PoolManager } from "../../ipam/pools.ts";
import { reconcile, type ReconcileReport } from "../../ipam/reconcile.ts";

/** The node's instance id in the memory cloud. */
export const MEMORY_INSTANCE = "i-0memory";

/** An AWS-style error: `code` is what ipam/cloud.ts's `cloudErrorCode` reads. */
function awsError(code: string, message = code): Error {
  return Object.assign(new Error(message), { code });
}

/** The memory cloud's EC2 and IMDS for one node in zone `az1`, subnets `10.0.<n>.0/24`. */
export class MemoryCloud implements CloudApi {
  readonly enis = new Map<string, EniDescription>();
  readonly subnets: SubnetInfo[];
  readonly calls = new Map<string, number>();
  readonly #faults = new Map<string, string[]>();
  readonly #used = new Set<string>();
  #next = 1;

  /**
   * A node with a primary ENI in the first subnet; `subnetSizes` are the free addresses of
   * each subnet (`subnet-0` … ), `maxEnis` and `ipv4PerEni` the instance's limits.
   */
  constructor(
    readonly limits = { maxEnis: 3, ipv4PerEni: 5 },
    subnetSizes: number[] = [200],
  ) {
    this.subnets = subnetSizes.map((n, i) => ({
      id: `subnet-${i}`,
      cidr: `10.0.${i}.0/24`,
      az: "az1",
      availableIps: n,
      tags: {},
    }));
    const primary = this.#create("subnet-0", ["sg-0"], {}, 0);
    primary.attachment = {
      id: "attach-0",
      instanceId: MEMORY_INSTANCE,
      deviceIndex: 0,
      status: "attached",
    };
  }

  /** The next `times` calls of `action` (a method name) fail with AWS error `code`. */
  fail(action: string, code: string, times = 1): void {
    this.#faults.set(action, [...(this.#faults.get(action) ?? []), ...Array(times).fill(code)]);
  }

  /** Calls of `action` made so far. */
  count(action: string): number {
    return this.calls.get(action) ?? 0;
  }

  /** Addresses EC2 has assigned to the node's ENIs, the ENIs' primary addresses excepted. */
  assigned(): string[] {
    return [...this.enis.values()].flatMap((e) => e.privateIps.slice(1)).sort();
  }

  #call(action: string): void {
    this.calls.set(action, this.count(action) + 1);
    const code = this.#faults.get(action)?.shift();
    if (code) throw awsError(code, `${action}: injected ${code}`);
  }

  #address(subnetId: string): string {
    const s = this.subnets.find((x) => x.id === subnetId)!;
    if (s.availableIps <= 0) throw awsError("InsufficientFreeAddressesInSubnet");
    const base = s.cidr.split(".").slice(0, 3).join(".");
    for (let i = 4; i < 255; i++) {
      const ip = `${base}.${i}`;
      if (this.#used.has(ip)) continue;
      this.#used.add(ip);
      s.availableIps--;
      return ip;
    }
    throw awsError("InsufficientFreeAddressesInSubnet");
  }

  #create(subnetId: string, sgs: string[], tags: Record<string, string>, n: number) {
    const id = `eni-${this.#next++}`;
    const d: EniDescription = {
      id,
      subnetId,
      mac: `02:00:00:00:00:${id.slice(4).padStart(2, "0")}`,
      status: "available",
      privateIps: Array.from({ length: n + 1 }, () => this.#address(subnetId)),
      prefixes: [],
      tags,
      securityGroupIds: sgs,
    };
    this.enis.set(id, d);
    return d;
  }

  #eni(id: string): EniDescription {
    const d = this.enis.get(id);
    if (!d) throw awsError("InvalidNetworkInterfaceID.NotFound");
    return d;
  }

  #give(subnetId: string, ips: string[]): void {
    for (const ip of ips) this.#used.delete(ip);
    this.subnets.find((x) => x.id === subnetId)!.availableIps += ips.length;
  }

  nodeMetadata(): Promise<NodeMetadata> {
    this.#call("nodeMetadata");
    const enis = [...this.enis.values()].filter((d) => d.attachment).map((d) => ({
      mac: d.mac,
      deviceIndex: d.attachment!.deviceIndex,
      eniId: d.id,
      subnetId: d.subnetId,
      subnetCidr: this.subnets.find((s) => s.id === d.subnetId)!.cidr,
      localIpv4s: [...d.privateIps],
      ipv4Prefixes: [...d.prefixes],
      securityGroupIds: d.securityGroupIds,
    }));
    return Promise.resolve({
      instanceId: MEMORY_INSTANCE,
      instanceType: "m5.memory",
      az: "az1",
      region: "memory-1",
      vpcCidrs: ["10.0.0.0/16"],
      enis,
    });
  }
  attachedMacs(): Promise<string[]> {
    return Promise.resolve([...this.enis.values()].filter((d) => d.attachment).map((d) => d.mac));
  }
  instanceLimits() {
    this.#call("instanceLimits");
    return Promise.resolve({ ...this.limits });
  }
  describeSubnets(): Promise<SubnetInfo[]> {
    this.#call("describeSubnets");
    return Promise.resolve(this.subnets.map((s) => ({ ...s })));
  }
  describeSecurityGroups(): Promise<SecurityGroupInfo[]> {
    this.#call("describeSecurityGroups");
    return Promise.resolve([]);
  }
  describeTaggedEnis(tags: Record<string, string>): Promise<EniDescription[]> {
    this.#call("describeTaggedEnis");
    const all = [...this.enis.values()];
    return Promise.resolve(
      all.filter((d) => Object.entries(tags).every(([k, v]) => d.tags[k] === v)),
    );
  }
  describeEnis(ids: string[]): Promise<EniDescription[]> {
    this.#call("describeEnis");
    return Promise.resolve(
      ids.flatMap((id) => this.enis.get(id) ?? []).map((d) => structuredClone(d)),
    );
  }
  describeAttachedEnis(instanceId: string): Promise<EniDescription[]> {
    this.#call("describeAttachedEnis");
    const all = [...this.enis.values()].filter((d) => d.attachment?.instanceId === instanceId);
    return Promise.resolve(all.map((d) => structuredClone(d)));
  }
  createEni(o: Parameters<CloudApi["createEni"]>[0]): Promise<EniDescription> {
    this.#call("createEni");
    const d = this.#create(o.subnetId, o.securityGroupIds, o.tags, o.secondaryIpCount ?? 0);
    for (let i = 0; i < (o.prefixCount ?? 0); i++) d.prefixes.push(this.#prefix(d));
    return Promise.resolve(structuredClone(d));
  }
  attachEni(o: { eniId: string; instanceId: string; deviceIndex: number }): Promise<string> {
    this.#call("attachEni");
    const d = this.#eni(o.eniId);
    const taken = [...this.enis.values()].filter((e) => e.attachment).length;
    if (taken >= this.limits.maxEnis) throw awsError("AttachmentLimitExceeded");
    d.attachment = { id: `attach-${d.id}`, ...o, status: "attached" };
    d.status = "in-use";
    return Promise.resolve(d.attachment.id);
  }
  setDeleteOnTermination(): Promise<void> {
    this.#call("setDeleteOnTermination");
    return Promise.resolve();
  }
  detachEni(attachmentId: string): Promise<void> {
    this.#call("detachEni");
    const d = [...this.enis.values()].find((e) => e.attachment?.id === attachmentId);
    if (d) [d.attachment, d.status] = [undefined, "available"];
    return Promise.resolve();
  }
  deleteEni(eniId: string): Promise<void> {
    this.#call("deleteEni");
    const d = this.#eni(eniId);
    if (d.attachment) throw awsError("InvalidNetworkInterface.InUse");
    this.#give(d.subnetId, d.privateIps);
    this.enis.delete(eniId);
    return Promise.resolve();
  }
  assignIps(o: { eniId: string; count: number }): Promise<string[]> {
    this.#call("assignIps");
    const d = this.#eni(o.eniId);
    if (d.privateIps.length + o.count > this.limits.ipv4PerEni) {
      throw awsError("PrivateIpAddressLimitExceeded");
    }
    const ips = Array.from({ length: o.count }, () => this.#address(d.subnetId));
    d.privateIps.push(...ips);
    return Promise.resolve(ips);
  }
  assignPrefixes(o: { eniId: string; count: number }): Promise<string[]> {
    this.#call("assignPrefixes");
    const d = this.#eni(o.eniId);
    const got = Array.from({ length: o.count }, () => this.#prefix(d));
    d.prefixes.push(...got);
    return Promise.resolve(got);
  }
  unassignIps(o: { eniId: string; ips: string[] }): Promise<void> {
    this.#call("unassignIps");
    const d = this.#eni(o.eniId);
    d.privateIps = d.privateIps.filter((ip) => !o.ips.includes(ip));
    this.#give(d.subnetId, o.ips);
    return Promise.resolve();
  }
  unassignPrefixes(o: { eniId: string; prefixes: string[] }): Promise<void> {
    this.#call("unassignPrefixes");
    const d = this.#eni(o.eniId);
    d.prefixes = d.prefixes.filter((p) => !o.prefixes.includes(p));
    return Promise.resolve();
  }
  callCounts() {
    return { calls: new Map(this.calls), errors: new Map<string, number>(), throttles: 0 };
  }

  /** A /28 prefix for an ENI, from the top half of its subnet (addresses are the bottom). */
  #prefix(d: EniDescription): string {
    const base = this.subnets.find((s) => s.id === d.subnetId)!.cidr.split(".").slice(0, 3);
    const taken = new Set([...this.enis.values()].flatMap((e) => e.prefixes));
    for (let i = 128; i < 256; i += 16) {
      const p = `${base.join(".")}.${i}/28`;
      if (!taken.has(p)) return p;
    }
    throw awsError("InsufficientCidrBlocks");
  }
}

/** A pool manager over a memory cloud, wired as the daemon wires it, with a fake clock. */
export interface MemoryNode {
  cloud: MemoryCloud;
  pools: PoolManager;
  state: NodeState;
  report: ReconcileReport;
  /** The clock every owner reads (epoch ms); tests move it. */
  clock: { now: number };
  /** The last checkpoint "written to disk". */
  disk: () => Checkpoint | undefined;
  /** While true, every checkpoint write fails (a full or read-only disk). */
  failWrites: { on: boolean };
}

/** What a memory node starts from besides its cloud. */
export interface MemoryNodeOptions {
  /** The daemon's configuration (pools and knobs), as a config file would give it. */
  config?: Record<string, unknown>;
  /** The checkpoint a previous run left. */
  checkpoint?: Checkpoint;
  /** What the kernel shows of pods (default: every pod alive, no routes readable). */
  kernel?: KernelView;
  /** The clock's start. */
  now?: number;
}

/** Reconciles a node against `cloud` (and a checkpoint) and builds its pool manager. */
export async function memoryNode(
  cloud: MemoryCloud,
  o: MemoryNodeOptions = {},
): Promise<MemoryNode> {
  const cfg = configSchema.parse({ stateDir: "/nonexistent/vpcni", ...o.config });
  const clock = { now: o.now ?? 1_000_000 };
  const now = () => clock.now;
  const node = await cloud.nodeMetadata();
  const limits = await cloud.instanceLimits();
  const subnets = cloud.subnets.map((s) => ({ ...s }));
  const kernel = o.kernel ?? {
    podAlive: () => Promise.resolve(true),
    routedPodIps: () => Promise.resolve(undefined),
    ruledPodIps: () => Promise.resolve(undefined),
  };
  const { state, report } = await reconcile({
    cfg,
    cloud,
    node,
    subnets,
    checkpoint: o.checkpoint,
    kernel,
    now: now(),
  });
  let disk: Checkpoint | undefined = o.checkpoint;
  const failWrites = { on: false };
  const pools = new PoolManager({
    ctx: {
      cfg,
      cloud,
      state,
      metrics: createMetrics(),
      instanceId: node.instanceId,
      az: node.az,
      primarySubnetId: node.enis[0].subnetId,
      maxEnis: limits.maxEnis,
      ipv4PerEni: limits.ipv4PerEni,
      foreignDeviceIndexes: new Set(report.foreignDeviceIndexes),
      reservedDeviceIndexes: new Set(),
      reservedSubnets: [],
      spareEnis: [],
      creating: new Set(),
      subnets,
      fullSubnets: new Map(),
      now,
      random: () => 0,
    },
    securityGroups: new Map(),
    vpcCidrs: node.vpcCidrs,
    nodeIps: node.enis[0].localIpv4s.slice(0, 1),
    save: () => {
      if (failWrites.on) return Promise.reject(new Error("No space left on device (os error 28)"));
      disk = structuredClone(state.toCheckpoint(now()));
      return Promise.resolve();
    },
  });
  return { cloud, pools, state, report, clock, disk: () => disk, failWrites };
}

/** An ADD request of pod `name` (container `c-<name>`, interface eth0). */
export function addOf(name: string, annotations?: Record<string, string>): IpamAddRequest {
  return {
    version: IPAM_PROTOCOL_VERSION,
    op: "add",
    network: "vpcni",
    containerId: `c-${name}`,
    ifName: "eth0",
    netns: `/run/netns/${name}`,
    podNamespace: "default",
    podName: name,
    ...(annotations ? { annotations } : {}),
  };
}

/** The attachment key of pod `name`'s ADD. */
export function keyOf(name: string): string {
  return attachmentKey(addOf(name));
}
