/**
 * The simulated VPC world: subnets with their address books, security groups, instances and
 * ENIs with IPs and /28 prefixes. Every EC2 mutation the simulator serves is a method here
 * that checks everything first and then commits, so a failed call changes nothing. The
 * bodies live in a module per concern (network_interfaces.ts, attachments.ts,
 * ip_assignment.ts); seeding.ts builds the starting world from the scenario.
 *
 * @module
 */
import { SimError } from "./errors.ts";
import type { Scenario } from "./scenario.ts";
import type { FaultConfig } from "./faults.ts";
import type {
  AssignParams,
  AttachmentState,
  CreateEniParams,
  EniState,
  InstanceState,
  ModifyEniParams,
  SecurityGroupState,
  SimEvent,
  SubnetState,
} from "./model.ts";
import { availableIps } from "./addresses.ts";
import { attachNetworkInterface, detachNetworkInterface } from "./attachments.ts";
import { assignPrivateIps, unassignPrivateIps } from "./ip_assignment.ts";
import {
  createNetworkInterface,
  deleteNetworkInterface,
  modifyNetworkInterfaceAttribute,
} from "./network_interfaces.ts";
import { seedWorld } from "./seeding.ts";

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
  /** Instance id → its ENIs by device index; dropped by every event (see `enisOf`). */
  #enisOf?: Map<string, EniState[]>;
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
    seedWorld(this, this.#macs, source);
    this.#enisOf = undefined;
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
    // Every IMDS read asks this; a scan of the account's ENIs per read is what a thousand
    // simulated nodes polling their metadata cannot afford. Attachments change only through
    // calls that emit an event, and each event drops the index.
    let byInstance = this.#enisOf;
    if (!byInstance) {
      byInstance = new Map();
      for (const e of this.enis.values()) {
        const id = e.attachment?.instanceId;
        if (id === undefined) continue;
        const list = byInstance.get(id);
        if (list) list.push(e);
        else byInstance.set(id, [e]);
      }
      for (const list of byInstance.values()) {
        list.sort((a, b) => a.attachment!.deviceIndex - b.attachment!.deviceIndex);
      }
      this.#enisOf = byInstance;
    }
    return (byInstance.get(instanceId) ?? []).filter((e) =>
      e.attachment?.instanceId === instanceId
    );
  }

  // ---------------------------------------------------------------- mutations

  /** CreateNetworkInterface. Returns the ENI (an existing one for a repeated ClientToken). */
  createNetworkInterface(p: CreateEniParams): EniState {
    return createNetworkInterface(this, this.#macs, p);
  }

  /** DeleteNetworkInterface. */
  deleteNetworkInterface(eniId: string): void {
    deleteNetworkInterface(this, this.#macs, eniId);
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
  modifyNetworkInterfaceAttribute(eniId: string, m: ModifyEniParams): void {
    modifyNetworkInterfaceAttribute(this, eniId, m);
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
    this.#enisOf = undefined;
    for (const l of this.#listeners) {
      try {
        l(e);
      } catch (err) {
        console.error(`sim listener failed: ${(err as Error).message}`);
      }
    }
  }
}
