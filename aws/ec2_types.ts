/**
 * Plain objects the EC2 client returns, and their conversion from the SDK's shapes. Only the
 * client's own modules (`aws/ec2*.ts`) know the SDK's shapes; callers see these types.
 *
 * @module
 */
import type * as sdk from "@aws-sdk/client-ec2";
import type { InstanceTypeInfo } from "./limits.ts";

export type { InstanceTypeInfo };

/** Tags as a plain map. */
export type Tags = Record<string, string>;

/** An ENI's attachment to an instance. */
export interface EniAttachment {
  attachmentId: string;
  instanceId?: string;
  deviceIndex: number;
  networkCardIndex?: number;
  /** attaching | attached | detaching | detached */
  status: string;
  deleteOnTermination: boolean;
}

/** A secondary (or primary) private IPv4 address of an ENI. */
export interface EniPrivateIp {
  ip: string;
  primary: boolean;
}

/** An Elastic Network Interface. */
export interface NetworkInterface {
  eniId: string;
  subnetId: string;
  vpcId: string;
  az: string;
  mac: string;
  description: string;
  /** available | in-use | attaching | detaching | associated */
  status: string;
  /** The primary private IPv4 address. */
  privateIp: string;
  /** All private IPv4 addresses, primary first. */
  privateIps: EniPrivateIp[];
  /** Delegated IPv4 prefixes (`a.b.c.d/28`). */
  ipv4Prefixes: string[];
  securityGroupIds: string[];
  attachment?: EniAttachment;
  interfaceType: string;
  sourceDestCheck?: boolean;
  requesterManaged: boolean;
  tags: Tags;
}

/** A subnet. */
export interface Subnet {
  subnetId: string;
  vpcId: string;
  cidr: string;
  az: string;
  azId?: string;
  availableIpCount: number;
  defaultForAz: boolean;
  state: string;
  tags: Tags;
}

/** A VPC with all its IPv4 CIDR blocks (primary first). */
export interface Vpc {
  vpcId: string;
  cidrs: string[];
  state: string;
  isDefault: boolean;
  tags: Tags;
}

/** A security group. */
export interface SecurityGroup {
  groupId: string;
  groupName: string;
  description: string;
  vpcId?: string;
  tags: Tags;
}

/** An ENI as seen from DescribeInstances. */
export interface InstanceEni {
  eniId: string;
  deviceIndex: number;
  networkCardIndex?: number;
  attachmentId?: string;
  subnetId?: string;
  mac?: string;
  privateIp?: string;
  privateIps: string[];
  ipv4Prefixes: string[];
}

/** An EC2 instance. */
export interface Instance {
  instanceId: string;
  instanceType: string;
  /** pending | running | stopping | stopped | shutting-down | terminated */
  state: string;
  az: string;
  subnetId?: string;
  vpcId?: string;
  privateIp?: string;
  securityGroupIds: string[];
  enis: InstanceEni[];
  launchTime?: Date;
  tags: Tags;
}

/** Addresses AssignPrivateIpAddresses handed out. */
export interface AssignedAddresses {
  ips: string[];
  prefixes: string[];
}

/** Converts an SDK tag list to a plain map. */
export function tagsOf(t: sdk.Tag[] | undefined): Tags {
  const out: Tags = {};
  for (const { Key, Value } of t ?? []) if (Key !== undefined) out[Key] = Value ?? "";
  return out;
}

/** Converts a plain map to an SDK tag list. */
export function tagList(t: Tags): sdk.Tag[] {
  return Object.entries(t).map(([Key, Value]) => ({ Key, Value }));
}

/** SDK NetworkInterface → {@linkcode NetworkInterface}. */
export function toNetworkInterface(n: sdk.NetworkInterface): NetworkInterface {
  const ips = (n.PrivateIpAddresses ?? []).map((p) => ({
    ip: p.PrivateIpAddress ?? "",
    primary: p.Primary ?? false,
  })).sort((a, b) => Number(b.primary) - Number(a.primary));
  if (ips.length === 0 && n.PrivateIpAddress) ips.push({ ip: n.PrivateIpAddress, primary: true });
  const a = n.Attachment;
  const out: NetworkInterface = {
    eniId: n.NetworkInterfaceId ?? "",
    subnetId: n.SubnetId ?? "",
    vpcId: n.VpcId ?? "",
    az: n.AvailabilityZone ?? "",
    mac: n.MacAddress ?? "",
    description: n.Description ?? "",
    status: n.Status ?? "",
    privateIp: n.PrivateIpAddress ?? ips.find((i) => i.primary)?.ip ?? "",
    privateIps: ips,
    ipv4Prefixes: (n.Ipv4Prefixes ?? []).flatMap((p) => p.Ipv4Prefix ? [p.Ipv4Prefix] : []),
    securityGroupIds: (n.Groups ?? []).flatMap((g) => g.GroupId ? [g.GroupId] : []),
    interfaceType: n.InterfaceType ?? "interface",
    requesterManaged: n.RequesterManaged ?? false,
    tags: tagsOf(n.TagSet),
  };
  if (n.SourceDestCheck !== undefined) out.sourceDestCheck = n.SourceDestCheck;
  if (a?.AttachmentId) {
    out.attachment = {
      attachmentId: a.AttachmentId,
      deviceIndex: a.DeviceIndex ?? 0,
      status: a.Status ?? "",
      deleteOnTermination: a.DeleteOnTermination ?? false,
    };
    if (a.InstanceId) out.attachment.instanceId = a.InstanceId;
    if (a.NetworkCardIndex !== undefined) out.attachment.networkCardIndex = a.NetworkCardIndex;
  }
  return out;
}

/** SDK Subnet → {@linkcode Subnet}. */
export function toSubnet(s: sdk.Subnet): Subnet {
  const out: Subnet = {
    subnetId: s.SubnetId ?? "",
    vpcId: s.VpcId ?? "",
    cidr: s.CidrBlock ?? "",
    az: s.AvailabilityZone ?? "",
    availableIpCount: s.AvailableIpAddressCount ?? 0,
    defaultForAz: s.DefaultForAz ?? false,
    state: s.State ?? "",
    tags: tagsOf(s.Tags),
  };
  if (s.AvailabilityZoneId) out.azId = s.AvailabilityZoneId;
  return out;
}

/** SDK Vpc → {@linkcode Vpc}; associated CIDRs follow the primary one. */
export function toVpc(v: sdk.Vpc): Vpc {
  const cidrs = v.CidrBlock ? [v.CidrBlock] : [];
  for (const a of v.CidrBlockAssociationSet ?? []) {
    const state = a.CidrBlockState?.State;
    if (a.CidrBlock && !cidrs.includes(a.CidrBlock) && (!state || state === "associated")) {
      cidrs.push(a.CidrBlock);
    }
  }
  return {
    vpcId: v.VpcId ?? "",
    cidrs,
    state: v.State ?? "",
    isDefault: v.IsDefault ?? false,
    tags: tagsOf(v.Tags),
  };
}

/** SDK SecurityGroup → {@linkcode SecurityGroup}. */
export function toSecurityGroup(g: sdk.SecurityGroup): SecurityGroup {
  const out: SecurityGroup = {
    groupId: g.GroupId ?? "",
    groupName: g.GroupName ?? "",
    description: g.Description ?? "",
    tags: tagsOf(g.Tags),
  };
  if (g.VpcId) out.vpcId = g.VpcId;
  return out;
}

/** SDK Instance → {@linkcode Instance}; ENIs sorted by device index. */
export function toInstance(i: sdk.Instance): Instance {
  const enis = (i.NetworkInterfaces ?? []).map((n): InstanceEni => {
    const e: InstanceEni = {
      eniId: n.NetworkInterfaceId ?? "",
      deviceIndex: n.Attachment?.DeviceIndex ?? 0,
      privateIps: (n.PrivateIpAddresses ?? []).flatMap((p) =>
        p.PrivateIpAddress ? [p.PrivateIpAddress] : []
      ),
      ipv4Prefixes: (n.Ipv4Prefixes ?? []).flatMap((p) => p.Ipv4Prefix ? [p.Ipv4Prefix] : []),
    };
    if (n.Attachment?.AttachmentId) e.attachmentId = n.Attachment.AttachmentId;
    if (n.Attachment?.NetworkCardIndex !== undefined) {
      e.networkCardIndex = n.Attachment.NetworkCardIndex;
    }
    if (n.SubnetId) e.subnetId = n.SubnetId;
    if (n.MacAddress) e.mac = n.MacAddress;
    if (n.PrivateIpAddress) e.privateIp = n.PrivateIpAddress;
    return e;
  }).sort((a, b) => a.deviceIndex - b.deviceIndex);
  const out: Instance = {
    instanceId: i.InstanceId ?? "",
    instanceType: i.InstanceType ?? "",
    state: i.State?.Name ?? "",
    az: i.Placement?.AvailabilityZone ?? "",
    securityGroupIds: (i.SecurityGroups ?? []).flatMap((g) => g.GroupId ? [g.GroupId] : []),
    enis,
    tags: tagsOf(i.Tags),
  };
  if (i.SubnetId) out.subnetId = i.SubnetId;
  if (i.VpcId) out.vpcId = i.VpcId;
  if (i.PrivateIpAddress) out.privateIp = i.PrivateIpAddress;
  if (i.LaunchTime) out.launchTime = i.LaunchTime;
  return out;
}

/** SDK InstanceTypeInfo → {@linkcode InstanceTypeInfo}. */
export function toInstanceTypeInfo(t: sdk.InstanceTypeInfo): InstanceTypeInfo {
  const n = t.NetworkInfo;
  const out: InstanceTypeInfo = {
    instanceType: t.InstanceType ?? "",
    maxEnis: n?.MaximumNetworkInterfaces ?? 0,
    ipv4PerEni: n?.Ipv4AddressesPerInterface ?? 0,
    hypervisor: t.Hypervisor ?? "unknown",
    bareMetal: t.BareMetal ?? false,
  };
  if (t.VCpuInfo?.DefaultVCpus !== undefined) out.vcpus = t.VCpuInfo.DefaultVCpus;
  const cards = (n?.NetworkCards ?? []).flatMap((c) =>
    c.NetworkCardIndex !== undefined && c.MaximumNetworkInterfaces !== undefined
      ? [{ index: c.NetworkCardIndex, maxEnis: c.MaximumNetworkInterfaces }]
      : []
  );
  if (cards.length) out.networkCards = cards;
  if (n?.DefaultNetworkCardIndex !== undefined) out.defaultCard = n.DefaultNetworkCardIndex;
  return out;
}
