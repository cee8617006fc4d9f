/**
 * Filling a new world from its scenario: subnets, security groups, instances each with a
 * primary ENI at device 0 (with the addresses its launch assigned), then the scenario's extra ENIs, all dated as if they had existed
 * for a while (so neither Describe nor IMDS delays hide them).
 *
 * @module
 */
import { formatIpv4, parseIpv4, parseIpv4Network } from "../../base/ipv4.ts";
import { SimError } from "./errors.ts";
import { type Scenario, ScenarioError } from "./scenario.ts";
import { lookupTypeLimits, randomHex } from "./model.ts";
import { pickIps } from "./addresses.ts";
import { attachNetworkInterface } from "./attachments.ts";
import { assignPrivateIps } from "./ip_assignment.ts";
import { newEni } from "./network_interfaces.ts";
import type { SimState } from "./state.ts";

/**
 * Fills the empty maps of `state` from `state.scenario`. `macs` is the state's MAC book;
 * `source` names the scenario in a ScenarioError when one of its ENIs cannot be made.
 */
export function seedWorld(state: SimState, macs: Set<string>, source: string): void {
  const scenario = state.scenario;
  for (const s of scenario.subnets) {
    const cidr = parseIpv4Network(s.cidr)!;
    state.subnets.set(s.id, {
      id: s.id,
      cidr,
      az: s.az,
      vpcId: state.vpc.id,
      tags: new Map(Object.entries(s.tags)),
      used: new Set(),
      ipCursor: cidr.address + 4,
      prefixCursor: cidr.address,
    });
  }
  for (const g of scenario.securityGroups) {
    state.securityGroups.set(g.id, {
      id: g.id,
      name: g.name,
      description: g.description,
      vpcId: state.vpc.id,
      tags: new Map(Object.entries(g.tags)),
    });
  }
  for (const inst of scenario.instances) {
    const subnet = state.subnets.get(inst.subnet)!;
    const limits = lookupTypeLimits(inst.type, scenario)!;
    state.instances.set(inst.id, {
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
    const subnet = state.subnets.get(inst.subnet)!;
    const eni = newEni(macs, subnet, inst.securityGroups, "Primary network interface");
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
    state.enis.set(eni.id, eni);
  }
  scenario.instances.forEach((inst, i) => {
    if (inst.secondaryIps === 0 && inst.prefixes === 0) return;
    const eni = state.enisOf(inst.id).find((e) => e.attachment!.deviceIndex === 0)!;
    try {
      assignPrivateIps(state, eni.id, {
        count: inst.secondaryIps || undefined,
        prefixCount: inst.prefixes || undefined,
      });
    } catch (e) {
      if (!(e instanceof SimError)) throw e;
      throw new ScenarioError(source, [{
        field: `instances[${i}].${inst.secondaryIps ? "secondaryIps" : "prefixes"}`,
        message: `${e.code}: ${e.message}`,
      }]);
    }
    // Assigned at launch: long settled, as the primary address.
    for (const x of eni.privateIps) x.assignedAt = 0;
    for (const p of eni.prefixes) p.assignedAt = 0;
  });
  scenario.networkInterfaces.forEach((seed, i) => {
    try {
      seedEni(state, seed);
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
function seedEni(state: SimState, seed: Scenario["networkInterfaces"][number]): void {
  const eni = state.createNetworkInterface({
    subnetId: seed.subnet,
    groupIds: seed.securityGroups,
    description: seed.description,
    secondaryCount: seed.secondaryIps,
    prefixCount: seed.prefixes,
    tags: seed.tags,
  });
  if (seed.id !== undefined) {
    state.enis.delete(eni.id);
    eni.id = seed.id;
    state.enis.set(eni.id, eni);
  }
  eni.createdAt = 0;
  for (const x of eni.privateIps) x.assignedAt = 0;
  for (const p of eni.prefixes) p.assignedAt = 0;
  if (seed.attachment) {
    const att = attachNetworkInterface(
      state,
      eni.id,
      seed.attachment.instance,
      seed.attachment.deviceIndex,
      0,
      true,
    );
    att.attachedAt = 0;
  }
}
