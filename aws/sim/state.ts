/**
 * The simulated VPC world: subnets with their address books, security groups, instances and
 * ENIs with IPs and /28 prefixes. Every EC2 mutation the simulator serves is a method here
 * that checks everything first and then commits, so a failed call changes nothing.
 *
 * @module
 */
import { formatIpv4, parseIpv4, parseIpv4Network } from "../../netlink/ipv4.ts";
import { invalidCount, SimError } from "./errors.ts";
import { type Scenario, ScenarioError } from "./scenario.ts";
import type { FaultConfig } from "./faults.ts";
import {
  type AssignParams,
  type AttachmentState,
  type CreateEniParams,
  type EniState,
  type InstanceState,
  lookupTypeLimits,
  randomHex,
  type SecurityGroupState,
  type SimEvent,
  type SubnetState,
} from "./model.ts";
import {
  availableIps,
  insufficient,
  pickIps,
  pickPrefixes,
  releaseAddresses,
} from "./addresses.ts";

import { attachNetworkInterface, detachNetworkInterface } from "./attachments.ts";
import { assignPrivateIps, checkExplicitIp, unassignPrivateIps } from "./ip_assignment.ts";

export * from "./model.ts";

/** The live world of one simulator. Tests may read every map directly. */
export class SimState {
  /** The scenario this world was built from. */
  readonly scenario: Scenario;
  readonly region: string;
  readonly accountId: string;
  readonly vpc: { id: string; cidrs: string[]; tags: Map<string, string> };
  readonly subnets = new Map<string, SubnetState>();
  readonly securityGroups = new Map<string, SecurityGroupState>();
  readonly instances = new Map<string, InstanceState>();
  readonly enis = new Map<string, EniState>();
  /** ClientToken → the ENI it created and a digest of the request. */
  readonly clientTokens = new Map<string, { eniId: string; digest: string }>();
  /** Shared with the server; read for consistency and attach delays. */
  readonly faults: FaultConfig;
  #listeners = new Set<(e: SimEvent) => void>();
  #timers = new Set<ReturnType<typeof setTimeout>>();
  #macs = new Set<string>();
  #closed = false;

  constructor(scenario: Scenario, faults: FaultConfig, source = "<scenario>") {
    this.scenario = scenario;
    this.faults = faults;
    this.region = scenario.region;
    this.accountId = scenario.accountId;
    this.vpc = {
      id: scenario.vpc.id,
      cidrs: [...scenario.vpc.cidrs],
      tags: new Map(Object.entries(scenario.vpc.tags)),
    };
    for (const s of scenario.subnets) {
      const cidr = parseIpv4Network(s.cidr)!;
      this.subnets.set(s.id, {
        id: s.id,
        cidr,
        az: s.az,
        vpcId: this.vpc.id,
        tags: new Map(Object.entries(s.tags)),
        used: new Set(),
        ipCursor: cidr.address + 4,
        prefixCursor: cidr.address,
      });
    }
    for (const g of scenario.securityGroups) {
      this.securityGroups.set(g.id, {
        id: g.id,
        name: g.name,
        description: g.description,
        vpcId: this.vpc.id,
        tags: new Map(Object.entries(g.tags)),
      });
    }
    for (const inst of scenario.instances) {
      const subnet = this.subnets.get(inst.subnet)!;
      const limits = lookupTypeLimits(inst.type, scenario)!;
      this.instances.set(inst.id, {
        id: inst.id,
        limits,
        az: subnet.az,
        subnetId: subnet.id,
        securityGroupIds: [...inst.securityGroups],
        tags: new Map(Object.entries(inst.tags)),
        launchTime: new Date(),
        reservationId: `r-${randomHex(17)}`,
      });
      // Explicit primary IPs are taken before any is picked, so picks cannot collide.
      if (inst.primaryIp !== undefined) subnet.used.add(parseIpv4(inst.primaryIp)!);
    }
    for (const inst of scenario.instances) {
      const subnet = this.subnets.get(inst.subnet)!;
      const eni = this.#newEni(subnet, inst.securityGroups, "Primary network interface");
      const ip = inst.primaryIp !== undefined ? parseIpv4(inst.primaryIp)! : pickIps(subnet, 1)[0];
      subnet.used.add(ip);
      eni.privateIps.push({ address: formatIpv4(ip), primary: true, assignedAt: 0 });
      eni.createdAt = 0;
      eni.attachment = {
        id: `eni-attach-${randomHex(17)}`,
        instanceId: inst.id,
        deviceIndex: 0,
        networkCardIndex: 0,
        status: "attached",
        attachTime: new Date(),
        attachedAt: 0,
        deleteOnTermination: true,
      };
      this.enis.set(eni.id, eni);
    }
    scenario.networkInterfaces.forEach((seed, i) => {
      try {
        this.#seedEni(seed);
      } catch (e) {
        if (!(e instanceof SimError)) throw e;
        throw new ScenarioError(source, [{
          field: `networkInterfaces[${i}]`,
          message: `${e.code}: ${e.message}`,
        }]);
      }
    });
  }

  /** Creates (and attaches) a scenario ENI as if it had existed for a while. */
  #seedEni(seed: Scenario["networkInterfaces"][number]): void {
    const eni = this.createNetworkInterface({
      subnetId: seed.subnet,
      groupIds: seed.securityGroups,
      description: seed.description,
      secondaryCount: seed.secondaryIps,
      prefixCount: seed.prefixes,
      tags: seed.tags,
    });
    if (seed.id !== undefined) {
      this.enis.delete(eni.id);
      eni.id = seed.id;
      this.enis.set(eni.id, eni);
    }
    eni.createdAt = 0;
    for (const x of eni.privateIps) x.assignedAt = 0;
    for (const p of eni.prefixes) p.assignedAt = 0;
    if (seed.attachment) {
      const att = attachNetworkInterface(
        this,
        eni.id,
        seed.attachment.instance,
        seed.attachment.deviceIndex,
        0,
        true,
      );
      att.attachedAt = 0;
    }
  }

  /** Registers a listener for every change; returns a function that removes it. */
  onChange(listener: (e: SimEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Stops pending attach/detach timers (called by the server on close). */
  close(): void {
    this.#closed = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }

  // ---------------------------------------------------------------- lookups

  /** The subnet or InvalidSubnetID.NotFound. */
  subnet(id: string): SubnetState {
    const s = this.subnets.get(id);
    if (!s) throw new SimError("InvalidSubnetID.NotFound", `The subnet ID '${id}' does not exist`);
    return s;
  }

  /** The instance or InvalidInstanceID.NotFound. */
  instance(id: string): InstanceState {
    const i = this.instances.get(id);
    if (!i) {
      throw new SimError(
        /^i-[0-9a-f]+$/.test(id) ? "InvalidInstanceID.NotFound" : "InvalidInstanceID.Malformed",
        /^i-[0-9a-f]+$/.test(id)
          ? `The instance ID '${id}' does not exist`
          : `Invalid id: "${id}" (expecting "i-...")`,
      );
    }
    return i;
  }

  /** The ENI or InvalidNetworkInterfaceID.NotFound (hidden while not yet consistent). */
  eni(id: string, now = Date.now()): EniState {
    const e = this.enis.get(id);
    if (!e || !this.isVisible(e, now)) {
      if (!/^eni-[0-9a-f]+$/.test(id)) {
        throw new SimError(
          "InvalidNetworkInterfaceID.Malformed",
          `Invalid id: "${id}" (expecting "eni-...")`,
        );
      }
      throw new SimError(
        "InvalidNetworkInterfaceID.NotFound",
        `The networkInterface ID '${id}' does not exist`,
      );
    }
    return e;
  }

  /** Checks that every group exists, else InvalidGroup.NotFound. */
  checkGroups(ids: string[]): void {
    for (const g of ids) {
      if (!this.securityGroups.has(g)) {
        throw new SimError(
          "InvalidGroup.NotFound",
          `The security group '${g}' does not exist in VPC '${this.vpc.id}'`,
        );
      }
    }
  }

  /** True when Describe may show the ENI (eventual consistency). */
  isVisible(e: EniState, now = Date.now()): boolean {
    return e.createdAt + this.faults.consistencyDelayMs <= now;
  }

  /** Free addresses of a subnet, as DescribeSubnets reports them. */
  availableIps(s: SubnetState): number {
    return availableIps(s);
  }

  /** The ENIs attached (or attaching) to an instance, by device index. */
  enisOf(instanceId: string): EniState[] {
    return [...this.enis.values()]
      .filter((e) => e.attachment?.instanceId === instanceId)
      .sort((a, b) => a.attachment!.deviceIndex - b.attachment!.deviceIndex);
  }

  // ---------------------------------------------------------------- mutations

  /** CreateNetworkInterface. Returns the ENI (an existing one for a repeated ClientToken). */
  createNetworkInterface(p: CreateEniParams): EniState {
    const digest = JSON.stringify([
      p.subnetId,
      p.groupIds ?? [],
      p.description ?? "",
      p.privateIp ?? "",
      p.secondaryIps ?? [],
      p.secondaryCount ?? 0,
      p.prefixCount ?? 0,
      p.tags ?? {},
    ]);
    if (p.clientToken !== undefined) {
      const prior = this.clientTokens.get(p.clientToken);
      if (prior) {
        if (prior.digest !== digest) {
          throw new SimError(
            "IdempotentParameterMismatch",
            `Client token '${p.clientToken}' was already used with different parameters`,
          );
        }
        const existing = this.enis.get(prior.eniId);
        if (existing) return existing;
      }
    }
    const subnet = this.subnet(p.subnetId);
    let groups = p.groupIds ?? [];
    if (groups.length === 0) {
      const def = [...this.securityGroups.values()].find((g) => g.name === "default");
      groups = def ? [def.id] : [];
    }
    this.checkGroups(groups);
    const secondary = p.secondaryCount ?? 0;
    const prefixCount = p.prefixCount ?? 0;
    if (secondary < 0 || prefixCount < 0) invalidCount();
    // Take each address as it is chosen, and give them all back if a later step fails.
    const taken: number[] = [];
    const take = (ip: number) => {
      subnet.used.add(ip);
      taken.push(ip);
      return ip;
    };
    let primary: number, ips: number[], prefixes: number[];
    try {
      if (p.privateIp !== undefined) {
        primary = take(checkExplicitIp(this, subnet, p.privateIp));
      } else {
        if (this.availableIps(subnet) < 1) insufficient();
        primary = take(pickIps(subnet, 1)[0]);
      }
      ips = (p.secondaryIps ?? []).map((text) => take(checkExplicitIp(this, subnet, text)));
      if (this.availableIps(subnet) < secondary) insufficient();
      ips.push(...pickIps(subnet, secondary).map(take));
      prefixes = pickPrefixes(subnet, prefixCount);
    } catch (e) {
      for (const ip of taken) subnet.used.delete(ip);
      throw e;
    }
    const now = Date.now();
    for (const base of prefixes) for (let k = 0; k < 16; k++) subnet.used.add(base + k);
    const eni = this.#newEni(subnet, groups, p.description ?? "");
    eni.createdAt = now;
    eni.privateIps.push({ address: formatIpv4(primary), primary: true, assignedAt: now });
    for (const ip of ips) {
      eni.privateIps.push({ address: formatIpv4(ip), primary: false, assignedAt: now });
    }
    for (const b of prefixes) eni.prefixes.push({ cidr: `${formatIpv4(b)}/28`, assignedAt: now });
    for (const [k, v] of Object.entries(p.tags ?? {})) eni.tags.set(k, v);
    this.enis.set(eni.id, eni);
    if (p.clientToken !== undefined) {
      this.clientTokens.set(p.clientToken, { eniId: eni.id, digest });
    }
    this.emit({ kind: "create", eniId: eni.id });
    return eni;
  }

  /** DeleteNetworkInterface. */
  deleteNetworkInterface(eniId: string): void {
    const eni = this.eni(eniId);
    if (eni.attachment) {
      throw new SimError(
        "InvalidNetworkInterface.InUse",
        `The network interface '${eniId}' is currently in use.`,
      );
    }
    releaseAddresses(this.subnets.get(eni.subnetId)!, eni);
    this.enis.delete(eniId);
    this.#macs.delete(eni.mac);
    this.emit({ kind: "delete", eniId });
  }

  /** AttachNetworkInterface; returns the attachment. */
  attachNetworkInterface(
    eniId: string,
    instanceId: string,
    deviceIndex: number,
    networkCardIndex = 0,
  ): AttachmentState {
    return attachNetworkInterface(this, eniId, instanceId, deviceIndex, networkCardIndex);
  }

  /** DetachNetworkInterface by attachment id. */
  detachNetworkInterface(attachmentId: string, force = false): void {
    detachNetworkInterface(this, attachmentId, force);
  }

  /** AssignPrivateIpAddresses; returns what was assigned. */
  assignPrivateIps(eniId: string, p: AssignParams): { ips: string[]; prefixes: string[] } {
    return assignPrivateIps(this, eniId, p);
  }

  /** UnassignPrivateIpAddresses (IPs and/or prefixes). */
  unassignPrivateIps(eniId: string, p: { ips?: string[]; prefixes?: string[] }): void {
    unassignPrivateIps(this, eniId, p);
  }

  /** ModifyNetworkInterfaceAttribute (one attribute per call, as in EC2). */
  modifyNetworkInterfaceAttribute(
    eniId: string,
    m: {
      groups?: string[];
      description?: string;
      sourceDestCheck?: boolean;
      attachmentId?: string;
      deleteOnTermination?: boolean;
    },
  ): void {
    const eni = this.eni(eniId);
    if (m.groups !== undefined) {
      this.checkGroups(m.groups);
      eni.groupIds = [...m.groups];
    }
    if (m.description !== undefined) eni.description = m.description;
    if (m.sourceDestCheck !== undefined) eni.sourceDestCheck = m.sourceDestCheck;
    if (m.deleteOnTermination !== undefined) {
      if (!eni.attachment || eni.attachment.id !== m.attachmentId) {
        throw new SimError(
          "InvalidAttachmentID.NotFound",
          `The attachment ID '${m.attachmentId}' does not exist`,
        );
      }
      eni.attachment.deleteOnTermination = m.deleteOnTermination;
    }
    this.emit({ kind: "modify", eniId });
  }

  /** CreateTags on ENIs, subnets, security groups, instances or the VPC. */
  createTags(resourceIds: string[], tags: Record<string, string>): void {
    const maps = resourceIds.map((id) => this.#tagsOf(id));
    for (const m of maps) for (const [k, v] of Object.entries(tags)) m.set(k, v);
    for (const id of resourceIds) {
      this.emit(id.startsWith("eni-") ? { kind: "tags", eniId: id } : { kind: "tags" });
    }
  }

  // ---------------------------------------------------------------- internals

  #tagsOf(id: string): Map<string, string> {
    if (id.startsWith("eni-")) return this.eni(id).tags;
    if (id.startsWith("subnet-")) return this.subnet(id).tags;
    if (id.startsWith("i-")) return this.instance(id).tags;
    if (id.startsWith("sg-")) {
      const g = this.securityGroups.get(id);
      if (!g) {
        throw new SimError("InvalidGroup.NotFound", `The security group '${id}' does not exist`);
      }
      return g.tags;
    }
    if (id.startsWith("vpc-")) {
      if (id !== this.vpc.id) {
        throw new SimError("InvalidVpcID.NotFound", `The vpc ID '${id}' does not exist`);
      }
      return this.vpc.tags;
    }
    throw new SimError("InvalidID", `The ID '${id}' is not valid`);
  }

  #newEni(subnet: SubnetState, groups: string[], description: string): EniState {
    let mac: string;
    do {
      mac = "02:" + randomHex(10).match(/../g)!.join(":");
    } while (this.#macs.has(mac));
    this.#macs.add(mac);
    return {
      id: `eni-${randomHex(17)}`,
      subnetId: subnet.id,
      vpcId: subnet.vpcId,
      az: subnet.az,
      mac,
      description,
      privateIps: [],
      prefixes: [],
      groupIds: [...groups],
      tags: new Map(),
      sourceDestCheck: true,
      createdAt: Date.now(),
    };
  }

  /** Runs `fn` after `ms` unless the state was closed (attach/detach completion). */
  schedule(ms: number, fn: () => void): void {
    if (this.#closed) return;
    const t = setTimeout(() => {
      this.#timers.delete(t);
      fn();
    }, ms);
    this.#timers.add(t);
  }

  /** Tells every listener about a change. */
  emit(e: SimEvent): void {
    for (const l of this.#listeners) {
      try {
        l(e);
      } catch (err) {
        console.error(`sim listener failed: ${(err as Error).message}`);
      }
    }
  }
}
