/**
 * The filter names each Describe action accepts and the values a resource offers for them
 * (EC2's names: `attachment.instance-id`, `subnet-id`, …; tags are handled generically).
 *
 * @module
 */
import type { EniState, InstanceState, SimState, SubnetState } from "./state.ts";
import { formatIpv4Cidr } from "../../netlink/ipv4.ts";

/** Filter names DescribeNetworkInterfaces accepts (plus tag:K, tag-key, tag-value). */
export const ENI_FILTERS = new Set([
  "network-interface-id",
  "subnet-id",
  "vpc-id",
  "status",
  "availability-zone",
  "mac-address",
  "description",
  "private-ip-address",
  "addresses.private-ip-address",
  "addresses.primary",
  "ipv4-prefix",
  "group-id",
  "group-name",
  "owner-id",
  "interface-type",
  "requester-managed",
  "source-dest-check",
  "attachment.instance-id",
  "attachment.attachment-id",
  "attachment.device-index",
  "attachment.status",
  "attachment.instance-owner-id",
  "attachment.delete-on-termination",
]);

/** Filter field values of an ENI. */
export function eniFields(s: SimState, e: EniState): Record<string, string[]> {
  const a = e.attachment;
  return {
    "network-interface-id": [e.id],
    "subnet-id": [e.subnetId],
    "vpc-id": [e.vpcId],
    "status": [a ? "in-use" : "available"],
    "availability-zone": [e.az],
    "mac-address": [e.mac],
    "description": [e.description],
    "private-ip-address": e.privateIps.map((x) => x.address),
    "addresses.private-ip-address": e.privateIps.map((x) => x.address),
    "addresses.primary": [...new Set(e.privateIps.map((x) => String(x.primary)))],
    "ipv4-prefix": e.prefixes.map((p) => p.cidr),
    "group-id": e.groupIds,
    "group-name": e.groupIds.map((g) => s.securityGroups.get(g)?.name ?? ""),
    "owner-id": [s.accountId],
    "interface-type": ["interface"],
    "requester-managed": ["false"],
    "source-dest-check": [String(e.sourceDestCheck)],
    "attachment.instance-id": a ? [a.instanceId] : [],
    "attachment.attachment-id": a ? [a.id] : [],
    "attachment.device-index": a ? [String(a.deviceIndex)] : [],
    "attachment.status": a ? [a.status] : [],
    "attachment.instance-owner-id": a ? [s.accountId] : [],
    "attachment.delete-on-termination": a ? [String(a.deleteOnTermination)] : [],
  };
}

/** Filter names DescribeSubnets accepts. */
export const SUBNET_FILTERS = new Set([
  "subnet-id",
  "vpc-id",
  "availability-zone",
  "availability-zone-id",
  "cidr-block",
  "cidr",
  "cidrBlock",
  "state",
  "default-for-az",
  "available-ip-address-count",
  "owner-id",
]);

/** Filter field values of a subnet. */
export function subnetFields(s: SimState, sn: SubnetState): Record<string, string[]> {
  const cidr = formatIpv4Cidr(sn.cidr);
  return {
    "subnet-id": [sn.id],
    "vpc-id": [sn.vpcId],
    "availability-zone": [sn.az],
    "availability-zone-id": [],
    "cidr-block": [cidr],
    "cidr": [cidr],
    "cidrBlock": [cidr],
    "state": ["available"],
    "default-for-az": ["false"],
    "available-ip-address-count": [String(s.availableIps(sn))],
    "owner-id": [s.accountId],
  };
}

/** Filter names DescribeInstances accepts. */
export const INSTANCE_FILTERS = new Set([
  "instance-id",
  "instance-type",
  "subnet-id",
  "vpc-id",
  "availability-zone",
  "instance-state-name",
  "instance-state-code",
  "private-ip-address",
  "network-interface.network-interface-id",
  "network-interface.addresses.private-ip-address",
]);

/** Filter field values of an instance. */
export function instanceFields(s: SimState, i: InstanceState): Record<string, string[]> {
  const enis = s.enisOf(i.id);
  return {
    "instance-id": [i.id],
    "instance-type": [i.limits.type],
    "subnet-id": [i.subnetId],
    "vpc-id": [s.vpc.id],
    "availability-zone": [i.az],
    "instance-state-name": ["running"],
    "instance-state-code": ["16"],
    "private-ip-address": enis.filter((e) => e.attachment!.deviceIndex === 0)
      .flatMap((e) => e.privateIps.filter((x) => x.primary).map((x) => x.address)),
    "network-interface.network-interface-id": enis.map((e) => e.id),
    "network-interface.addresses.private-ip-address": enis.flatMap((e) =>
      e.privateIps.map((x) => x.address)
    ),
  };
}

/** Filter names DescribeSecurityGroups accepts. */
export const SG_FILTERS = new Set(["group-id", "group-name", "vpc-id", "description", "owner-id"]);
/** Filter names DescribeVpcs accepts. */
export const VPC_FILTERS = new Set([
  "vpc-id",
  "cidr",
  "cidr-block-association.cidr-block",
  "state",
  "is-default",
  "owner-id",
]);
/** Filter names DescribeInstanceTypes accepts. */
export const TYPE_FILTERS = new Set([
  "instance-type",
  "hypervisor",
  "bare-metal",
  "network-info.maximum-network-interfaces",
  "network-info.ipv4-addresses-per-interface",
]);
