/**
 * XML renderings of simulator objects in the shapes EC2 returns (the element names the
 * SDK's EC2 protocol parser expects: `networkInterfaceSet`, `privateIpAddressesSet`, …).
 *
 * @module
 */
import type {
  EniState,
  InstanceState,
  SecurityGroupState,
  SimState,
  SubnetState,
  TypeLimits,
} from "./state.ts";
import { formatIpv4Cidr } from "../../base/ipv4.ts";

/** Escapes text for XML element content (quotes need no escaping there). */
export function esc(s: string): string {
  return s.replace(/[&<>]/g, (c) => c === "&" ? "&amp;" : c === "<" ? "&lt;" : "&gt;");
}

/** `<name>value</name>`, or nothing when the value is undefined. */
export function el(name: string, value: string | number | boolean | undefined): string {
  if (value === undefined) return "";
  return `<${name}>${typeof value === "string" ? esc(value) : String(value)}</${name}>`;
}

/** `<name><item>…</item>…</name>` from already-rendered items. */
export function set(name: string, items: string[]): string {
  return `<${name}>${items.map((i) => `<item>${i}</item>`).join("")}</${name}>`;
}

/** A `tagSet`. */
export function tagSet(tags: Map<string, string>): string {
  return set("tagSet", [...tags].map(([k, v]) => el("key", k) + el("value", v)));
}

function groupSet(state: SimState, ids: string[]): string {
  return set(
    "groupSet",
    ids.map((id) => el("groupId", id) + el("groupName", state.securityGroups.get(id)?.name ?? "")),
  );
}

/** The private DNS name EC2 gives an address in this region. */
export function privateDnsName(region: string, ip: string): string {
  const domain = region === "us-east-1" ? "ec2.internal" : `${region}.compute.internal`;
  return `ip-${ip.replaceAll(".", "-")}.${domain}`;
}

/** An ENI as DescribeNetworkInterfaces / CreateNetworkInterface return it. */
export function networkInterfaceXml(state: SimState, e: EniState): string {
  const primary = e.privateIps.find((x) => x.primary)?.address;
  const a = e.attachment;
  const attachment = a
    ? "<attachment>" + el("attachmentId", a.id) + el("instanceId", a.instanceId) +
      el("instanceOwnerId", state.accountId) + el("deviceIndex", a.deviceIndex) +
      el("networkCardIndex", a.networkCardIndex) + el("status", a.status) +
      el("attachTime", a.attachTime.toISOString()) +
      el("deleteOnTermination", a.deleteOnTermination) +
      "</attachment>"
    : "";
  return el("networkInterfaceId", e.id) + el("subnetId", e.subnetId) + el("vpcId", e.vpcId) +
    el("availabilityZone", e.az) + el("description", e.description) +
    el("ownerId", state.accountId) +
    // EC2 names who created the ENI; for one the account created, that is the account's id.
    el("requesterId", state.accountId) +
    el("requesterManaged", false) + el("status", a ? "in-use" : "available") +
    el("macAddress", e.mac) +
    el("privateIpAddress", primary) +
    el("privateDnsName", primary ? privateDnsName(state.region, primary) : undefined) +
    el("sourceDestCheck", e.sourceDestCheck) + groupSet(state, e.groupIds) + attachment +
    tagSet(e.tags) +
    addressSets(state, e) +
    set("ipv6AddressesSet", []) + el("interfaceType", "interface");
}

/** An ENI's `privateIpAddressesSet` and `ipv4PrefixSet`, as both ENI shapes carry them. */
function addressSets(state: SimState, e: EniState): string {
  return set(
    "privateIpAddressesSet",
    e.privateIps.map((x) =>
      el("privateIpAddress", x.address) +
      el("privateDnsName", privateDnsName(state.region, x.address)) +
      el("primary", x.primary)
    ),
  ) + set("ipv4PrefixSet", e.prefixes.map((p) => el("ipv4Prefix", p.cidr)));
}

/** An ENI as it appears inside DescribeInstances' `networkInterfaceSet`. */
export function instanceNetworkInterfaceXml(state: SimState, e: EniState): string {
  const primary = e.privateIps.find((x) => x.primary)?.address;
  const a = e.attachment!;
  return el("networkInterfaceId", e.id) + el("subnetId", e.subnetId) + el("vpcId", e.vpcId) +
    el("description", e.description) + el("ownerId", state.accountId) + el("status", "in-use") +
    el("macAddress", e.mac) + el("privateIpAddress", primary) +
    el("privateDnsName", primary ? privateDnsName(state.region, primary) : undefined) +
    el("sourceDestCheck", e.sourceDestCheck) + groupSet(state, e.groupIds) +
    "<attachment>" + el("attachmentId", a.id) + el("deviceIndex", a.deviceIndex) +
    el("status", a.status) +
    el("attachTime", a.attachTime.toISOString()) +
    el("deleteOnTermination", a.deleteOnTermination) +
    el("networkCardIndex", a.networkCardIndex) + "</attachment>" +
    addressSets(state, e) +
    el("interfaceType", "interface");
}

/** A subnet as DescribeSubnets returns it. */
export function subnetXml(state: SimState, s: SubnetState): string {
  return el("subnetId", s.id) +
    el("subnetArn", `arn:aws:ec2:${state.region}:${state.accountId}:subnet/${s.id}`) +
    el("state", "available") + el("vpcId", s.vpcId) + el("cidrBlock", formatIpv4Cidr(s.cidr)) +
    set("ipv6CidrBlockAssociationSet", []) + el("availableIpAddressCount", state.availableIps(s)) +
    el("availabilityZone", s.az) + el("availabilityZoneId", azId(state.region, s.az)) +
    el("defaultForAz", false) + el("mapPublicIpOnLaunch", false) + el("ownerId", state.accountId) +
    el("assignIpv6AddressOnCreation", false) + tagSet(s.tags);
}

/** A stable zone id for an AZ name (use1-az1 style). */
export function azId(region: string, az: string): string {
  const parts = region.split("-");
  const short = parts[0] + parts.slice(1, -1).map((p) => p[0]).join("") + parts[parts.length - 1];
  const letter = az.slice(region.length);
  return `${short}-az${letter ? letter.charCodeAt(0) - 96 : 1}`;
}

/** The VPC as DescribeVpcs returns it. */
export function vpcXml(state: SimState): string {
  const v = state.vpc;
  return el("vpcId", v.id) + el("ownerId", state.accountId) + el("state", "available") +
    el("cidrBlock", v.cidrs[0]) +
    set(
      "cidrBlockAssociationSet",
      v.cidrs.map((c, i) =>
        el("cidrBlock", c) + el("associationId", `vpc-cidr-assoc-${v.id.slice(4)}${i}`) +
        "<cidrBlockState>" + el("state", "associated") + "</cidrBlockState>"
      ),
    ) + el("dhcpOptionsId", "dopt-00000000") + el("instanceTenancy", "default") +
    el("isDefault", false) +
    tagSet(v.tags);
}

/** A security group as DescribeSecurityGroups returns it. */
export function securityGroupXml(state: SimState, g: SecurityGroupState): string {
  return el("ownerId", state.accountId) + el("groupId", g.id) + el("groupName", g.name) +
    el("groupDescription", g.description) + el("vpcId", g.vpcId) +
    el(
      "securityGroupArn",
      `arn:aws:ec2:${state.region}:${state.accountId}:security-group/${g.id}`,
    ) +
    set("ipPermissions", []) + set("ipPermissionsEgress", []) + tagSet(g.tags);
}

/** One reservation holding one instance, as DescribeInstances returns it. */
export function reservationXml(state: SimState, i: InstanceState): string {
  const enis = state.enisOf(i.id);
  const primary = enis.find((e) => e.attachment!.deviceIndex === 0);
  const primaryIp = primary?.privateIps.find((x) => x.primary)?.address;
  const instance = el("instanceId", i.id) + el("imageId", "ami-00000000000000000") +
    "<instanceState>" + el("code", 16) + el("name", "running") + "</instanceState>" +
    el("privateDnsName", primaryIp ? privateDnsName(state.region, primaryIp) : undefined) +
    el("amiLaunchIndex", 0) + el("instanceType", i.limits.type) +
    el("launchTime", i.launchTime.toISOString()) +
    "<placement>" + el("availabilityZone", i.az) + el("tenancy", "default") + "</placement>" +
    el("subnetId", i.subnetId) + el("vpcId", state.vpc.id) + el("privateIpAddress", primaryIp) +
    el("sourceDestCheck", true) + groupSet(state, i.securityGroupIds) +
    el("architecture", "x86_64") +
    el("rootDeviceType", "ebs") +
    el("hypervisor", i.limits.hypervisor === "xen" ? "xen" : "nitro") +
    el("virtualizationType", "hvm") + tagSet(i.tags) +
    set("networkInterfaceSet", enis.map((e) => instanceNetworkInterfaceXml(state, e)));
  return el("reservationId", i.reservationId) + el("ownerId", state.accountId) +
    set("groupSet", []) +
    set("instancesSet", [instance]);
}

/** An instance type as DescribeInstanceTypes returns it (network facts only). */
export function instanceTypeXml(t: TypeLimits): string {
  return el("instanceType", t.type) + el("currentGeneration", true) + el("bareMetal", t.bareMetal) +
    el("hypervisor", t.hypervisor === "unknown" ? undefined : t.hypervisor) +
    (t.vcpus !== undefined ? `<vCpuInfo>${el("defaultVCpus", t.vcpus)}</vCpuInfo>` : "") +
    "<networkInfo>" + el("networkPerformance", "Up to 10 Gigabit") +
    el("maximumNetworkInterfaces", t.maxEnis) + el("maximumNetworkCards", t.networkCards.length) +
    el("defaultNetworkCardIndex", t.defaultCard) +
    set(
      "networkCards",
      t.networkCards.map(([i, n]) =>
        el("networkCardIndex", i) + el("networkPerformance", "Up to 10 Gigabit") +
        el("maximumNetworkInterfaces", n)
      ),
    ) +
    el("ipv4AddressesPerInterface", t.ipv4PerEni) + el("ipv6AddressesPerInterface", t.ipv4PerEni) +
    el("ipv6Supported", true) + el("enaSupport", "required") + "</networkInfo>";
}
