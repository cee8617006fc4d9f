/**
 * The EC2 filter names each Describe action of the client may send, from EC2's API reference
 * (the `Filter.N` section of each action). The client refuses any other name before sending a
 * request, and the simulator implements exactly these, so a filter never goes missing between
 * the two. Tag filters (`tag:<key>`, `tag-key`, `tag-value`) are accepted by every action here.
 *
 * @module
 */

/** The Describe actions that take filters, as the client names them. */
export type FilteredAction =
  | "DescribeNetworkInterfaces"
  | "DescribeSubnets"
  | "DescribeInstances"
  | "DescribeVpcs"
  | "DescribeSecurityGroups";

/** Filter names (besides the tag filters) each action accepts. */
export const FILTER_NAMES: Readonly<Record<FilteredAction, ReadonlySet<string>>> = {
  DescribeNetworkInterfaces: new Set([
    "network-interface-id",
    "subnet-id",
    "vpc-id",
    "status",
    "availability-zone",
    "mac-address",
    "description",
    "private-ip-address",
    "private-dns-name",
    "addresses.private-ip-address",
    "addresses.primary",
    "ipv4-prefix",
    "group-id",
    "group-name",
    "owner-id",
    "requester-id",
    "interface-type",
    "requester-managed",
    "source-dest-check",
    "attachment.instance-id",
    "attachment.attachment-id",
    "attachment.device-index",
    "attachment.status",
    "attachment.instance-owner-id",
    "attachment.delete-on-termination",
  ]),
  DescribeSubnets: new Set([
    "subnet-id",
    "vpc-id",
    "availability-zone",
    "availability-zone-id",
    "cidr-block",
    // EC2 takes these two as other names of cidr-block.
    "cidr",
    "cidrBlock",
    "state",
    "default-for-az",
    "available-ip-address-count",
    "owner-id",
  ]),
  DescribeInstances: new Set([
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
  ]),
  DescribeVpcs: new Set([
    "vpc-id",
    "cidr",
    "cidr-block-association.cidr-block",
    "state",
    "is-default",
    "owner-id",
  ]),
  DescribeSecurityGroups: new Set(["group-id", "group-name", "vpc-id", "description", "owner-id"]),
};

/** True for `tag:<key>` (non-empty key), `tag-key` and `tag-value`. */
export function isTagFilter(name: string): boolean {
  return (name.startsWith("tag:") && name.length > 4) || name === "tag-key" ||
    name === "tag-value";
}
