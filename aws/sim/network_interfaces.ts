/**
 * Creating, modifying and deleting ENIs: idempotent creation by ClientToken, the default
 * security group, addresses taken all-or-nothing, and MACs unique within the VPC.
 *
 * @module
 */
import { formatIpv4 } from "../../base/ipv4.ts";
import { invalidCount, SimError } from "./errors.ts";
import { insufficient, pickIps, pickPrefixes, releaseAddresses } from "./addresses.ts";
import { checkExplicitIp } from "./ip_assignment.ts";
import {
  type CreateEniParams,
  type EniState,
  type ModifyEniParams,
  randomHex,
  type SubnetState,
} from "./model.ts";
import type { SimState } from "./state.ts";

/**
 * CreateNetworkInterface. Returns the ENI (an existing one for a repeated ClientToken).
 * `macs` holds every MAC in use; the new ENI's is added to it.
 */
export function createNetworkInterface(
  state: SimState,
  macs: Set<string>,
  p: CreateEniParams,
): EniState {
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
    const prior = state.clientTokens.get(p.clientToken);
    if (prior) {
      if (prior.digest !== digest) {
        throw new SimError(
          "IdempotentParameterMismatch",
          `Client token '${p.clientToken}' was already used with different parameters`,
        );
      }
      const existing = state.enis.get(prior.eniId);
      if (existing) return existing;
    }
  }
  const subnet = state.subnet(p.subnetId);
  let groups = p.groupIds ?? [];
  if (groups.length === 0) {
    const def = [...state.securityGroups.values()].find((g) => g.name === "default");
    groups = def ? [def.id] : [];
  }
  state.checkGroups(groups);
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
      primary = take(checkExplicitIp(state, subnet, p.privateIp));
    } else {
      if (state.availableIps(subnet) < 1) insufficient();
      primary = take(pickIps(subnet, 1)[0]);
    }
    ips = (p.secondaryIps ?? []).map((text) => take(checkExplicitIp(state, subnet, text)));
    if (state.availableIps(subnet) < secondary) insufficient();
    ips.push(...pickIps(subnet, secondary).map(take));
    prefixes = pickPrefixes(subnet, prefixCount);
  } catch (e) {
    for (const ip of taken) subnet.used.delete(ip);
    throw e;
  }
  const now = Date.now();
  for (const base of prefixes) for (let k = 0; k < 16; k++) subnet.used.add(base + k);
  const eni = newEni(macs, subnet, groups, p.description ?? "");
  eni.createdAt = now;
  eni.privateIps.push({ address: formatIpv4(primary), primary: true, assignedAt: now });
  for (const ip of ips) {
    eni.privateIps.push({ address: formatIpv4(ip), primary: false, assignedAt: now });
  }
  for (const b of prefixes) eni.prefixes.push({ cidr: `${formatIpv4(b)}/28`, assignedAt: now });
  for (const [k, v] of Object.entries(p.tags ?? {})) eni.tags.set(k, v);
  state.enis.set(eni.id, eni);
  if (p.clientToken !== undefined) {
    state.clientTokens.set(p.clientToken, { eniId: eni.id, digest });
  }
  state.emit({ kind: "create", eniId: eni.id });
  return eni;
}

/** DeleteNetworkInterface; the ENI's addresses go back to its subnet and its MAC to `macs`. */
export function deleteNetworkInterface(
  state: SimState,
  macs: Set<string>,
  eniId: string,
): void {
  const eni = state.eni(eniId);
  if (eni.attachment) {
    throw new SimError(
      "InvalidNetworkInterface.InUse",
      `The network interface '${eniId}' is currently in use.`,
    );
  }
  releaseAddresses(state.subnets.get(eni.subnetId)!, eni);
  state.enis.delete(eniId);
  macs.delete(eni.mac);
  state.emit({ kind: "delete", eniId });
}

/** ModifyNetworkInterfaceAttribute (one attribute per call, as in EC2). */
export function modifyNetworkInterfaceAttribute(
  state: SimState,
  eniId: string,
  m: ModifyEniParams,
): void {
  const eni = state.eni(eniId);
  if (m.groups !== undefined) {
    state.checkGroups(m.groups);
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
  state.emit({ kind: "modify", eniId });
}

/**
 * A new ENI in `subnet` with no addresses, not yet in the world's map, with a fresh id and a
 * MAC not in `macs` (and added to it).
 */
export function newEni(
  macs: Set<string>,
  subnet: SubnetState,
  groups: string[],
  description: string,
): EniState {
  let mac: string;
  do {
    mac = "02:" + randomHex(10).match(/../g)!.join(":");
  } while (macs.has(mac));
  macs.add(mac);
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
