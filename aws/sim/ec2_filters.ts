/**
 * The values a resource offers for each filter name a Describe action accepts. The names are
 * the EC2 client's (`aws/ec2_filter_names.ts`), so every filter the client can send is
 * implemented here; tags are handled generically.
 *
 * @module
 */
import type { EniState, InstanceState, SimState, SubnetState } from "./state.ts";
import { formatIpv4Cidr } from "../../base/ipv4.ts";
import { FILTER_NAMES } from "../ec2_filter_names.ts";
import { azId, privateDnsName } from "./ec2_xml.ts";

/** Filter names DescribeNetworkInterfaces accepts (plus tag:K, tag-key, tag-value). */
export const ENI_FILTERS = FILTER_NAMES.DescribeNetworkInterfaces;

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
    "private-dns-name": e.privateIps.filter((x) => x.primary).map((x) =>
      privateDnsName(s.region, x.address)
    ),
    "addresses.private-ip-address": e.privateIps.map((x) => x.address),
    "addresses.primary": [...new Set(e.privateIps.map((x) => String(x.primary)))],
    "ipv4-prefix": e.prefixes.map((p) => p.cidr),
    "group-id": e.groupIds,
    "group-name": e.groupIds.map((g) => s.securityGroups.get(g)?.name ?? ""),
    "owner-id": [s.accountId],
    "requester-id": [s.accountId],
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
export const SUBNET_FILTERS = FILTER_NAMES.DescribeSubnets;

/** Filter field values of a subnet. */
export function subnetFields(s: SimState, sn: SubnetState): Record<string, string[]> {
  const cidr = formatIpv4Cidr(sn.cidr);
  return {
    "subnet-id": [sn.id],
    "vpc-id": [sn.vpcId],
    "availability-zone": [sn.az],
    "availability-zone-id": [azId(s.region, sn.az)],
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
export const INSTANCE_FILTERS = FILTER_NAMES.DescribeInstances;

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
export const SG_FILTERS = FILTER_NAMES.DescribeSecurityGroups;
/** Filter names DescribeVpcs accepts. */
export const VPC_FILTERS = FILTER_NAMES.DescribeVpcs;
/** Filter names DescribeInstanceTypes accepts. */
export const TYPE_FILTERS = new Set([
  "instance-type",
  "hypervisor",
  "bare-metal",
  "network-info.maximum-network-interfaces",
  "network-info.ipv4-addresses-per-interface",
]);
