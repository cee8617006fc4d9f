/**
 * The mutating actions of the EC2 client: an ENI's life (create, attach, detach, delete,
 * attributes), its private addresses and prefixes, and tags. Each checks its input, builds
 * its request(s) and reads the answer; sending them (with throttling, retries and counters)
 * is the client's: see {@linkcode Ec2Caller.call}.
 *
 * Where a retry may find the work done by an earlier attempt whose answer was lost, the
 * action says how to recognise that (`recover`), so the retry does not fail the call.
 *
 * @module
 */
import * as sdk from "@aws-sdk/client-ec2";
import type { Ec2Caller } from "./ec2_call.ts";
import { describeNetworkInterfaces } from "./ec2_describe.ts";
import {
  type AssignInput,
  bad,
  checkId,
  type CreateNetworkInterfaceInput,
  isIpv4,
  type ModifyNetworkInterfaceInput,
} from "./ec2_input.ts";
import {
  type AssignedAddresses,
  type NetworkInterface,
  tagList,
  type Tags,
  toNetworkInterface,
} from "./ec2_types.ts";

/** CreateNetworkInterface, tagged at creation, with one `ClientToken` for every attempt. */
export async function createNetworkInterface(
  calls: Ec2Caller,
  i: CreateNetworkInterfaceInput,
): Promise<NetworkInterface> {
  const A = "CreateNetworkInterface";
  const input = createNetworkInterfaceRequest(i);
  const res = await calls.call<sdk.CreateNetworkInterfaceResult>({
    action: A,
    command: () => new sdk.CreateNetworkInterfaceCommand(input),
  });
  if (!res.NetworkInterface) throw bad(A, "EC2 answered without a NetworkInterface");
  const eni = toNetworkInterface(res.NetworkInterface);
  calls.noteCreated(eni.eniId);
  return eni;
}

/** The checked request of {@linkcode createNetworkInterface}, its `ClientToken` chosen. */
function createNetworkInterfaceRequest(
  i: CreateNetworkInterfaceInput,
): sdk.CreateNetworkInterfaceRequest {
  const A = "CreateNetworkInterface";
  checkId(A, "subnetId", i?.subnetId);
  if (!Array.isArray(i.securityGroupIds)) throw bad(A, "securityGroupIds must be an array");
  i.securityGroupIds.forEach((g) => checkId(A, "security group id", g));
  for (const k of ["secondaryIpCount", "prefixCount"] as const) {
    const v = i[k];
    if (v !== undefined && (!Number.isInteger(v) || v < 0)) throw bad(A, `${k} must be >= 0`);
  }
  if (i.clientToken !== undefined && !/^[\x21-\x7e]{1,64}$/.test(i.clientToken)) {
    throw bad(A, "clientToken must be 1-64 printable ASCII characters");
  }
  return {
    SubnetId: i.subnetId,
    Groups: i.securityGroupIds.length ? i.securityGroupIds : undefined,
    Description: i.description,
    ClientToken: i.clientToken ?? crypto.randomUUID(),
    SecondaryPrivateIpAddressCount: i.secondaryIpCount || undefined,
    Ipv4PrefixCount: i.prefixCount || undefined,
    TagSpecifications: i.tags && Object.keys(i.tags).length
      ? [{ ResourceType: "network-interface", Tags: tagList(i.tags) }]
      : undefined,
  };
}

/**
 * AttachNetworkInterface; answers the attachment id. A retry refused because an earlier
 * attempt already attached the ENI at this index answers that attachment.
 */
export function attachNetworkInterface(
  calls: Ec2Caller,
  i: { eniId: string; instanceId: string; deviceIndex: number; networkCardIndex?: number },
): Promise<string> {
  const A = "AttachNetworkInterface";
  checkId(A, "eniId", i?.eniId);
  checkId(A, "instanceId", i.instanceId);
  if (!Number.isInteger(i.deviceIndex) || i.deviceIndex < 0) {
    return Promise.reject(bad(A, `deviceIndex must be an integer >= 0, got ${i.deviceIndex}`));
  }
  return calls.call<sdk.AttachNetworkInterfaceResult, string>({
    action: A,
    eniIds: [i.eniId],
    command: () =>
      new sdk.AttachNetworkInterfaceCommand({
        NetworkInterfaceId: i.eniId,
        InstanceId: i.instanceId,
        DeviceIndex: i.deviceIndex,
        NetworkCardIndex: i.networkCardIndex,
      }),
    read: (r) => {
      if (!r.AttachmentId) throw bad(A, "EC2 answered without an AttachmentId");
      return r.AttachmentId;
    },
    recover: async () => {
      const [eni] = await describeNetworkInterfaces(calls, { ids: [i.eniId] }).catch(() => []);
      const a = eni?.attachment;
      return a && a.instanceId === i.instanceId && a.deviceIndex === i.deviceIndex
        ? a.attachmentId
        : undefined;
    },
  });
}

/** DetachNetworkInterface; a retry that finds the attachment gone counts as done. */
export async function detachNetworkInterface(
  calls: Ec2Caller,
  i: { attachmentId: string; force?: boolean },
): Promise<void> {
  const A = "DetachNetworkInterface";
  checkId(A, "attachmentId", i?.attachmentId);
  await calls.call({
    action: A,
    command: () =>
      new sdk.DetachNetworkInterfaceCommand({ AttachmentId: i.attachmentId, Force: i.force }),
    recover: (e) => Promise.resolve(e.code === "InvalidAttachmentID.NotFound" ? true : undefined),
  });
}

/** DeleteNetworkInterface; a retry that finds the ENI gone counts as done. */
export async function deleteNetworkInterface(calls: Ec2Caller, eniId: string): Promise<void> {
  const A = "DeleteNetworkInterface";
  checkId(A, "eniId", eniId);
  await calls.call({
    action: A,
    eniIds: [eniId],
    command: () => new sdk.DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId }),
    recover: (e) =>
      Promise.resolve(e.code === "InvalidNetworkInterfaceID.NotFound" ? true : undefined),
  });
  calls.forgetCreated(eniId);
}

/**
 * ModifyNetworkInterfaceAttribute, one request per given attribute: EC2 takes one attribute
 * per request. `deleteOnTermination` needs the attachment id; it is looked up when not given.
 */
export async function modifyNetworkInterfaceAttribute(
  calls: Ec2Caller,
  i: ModifyNetworkInterfaceInput,
): Promise<void> {
  for (const input of await modifyAttributeRequests(calls, i)) {
    await calls.call({
      action: "ModifyNetworkInterfaceAttribute",
      eniIds: [i.eniId],
      command: () => new sdk.ModifyNetworkInterfaceAttributeCommand(input),
    });
  }
}

/**
 * The checked requests of {@linkcode modifyNetworkInterfaceAttribute}, one per attribute; the
 * attachment `deleteOnTermination` needs is looked up here when not given.
 */
async function modifyAttributeRequests(
  calls: Ec2Caller,
  i: ModifyNetworkInterfaceInput,
): Promise<sdk.ModifyNetworkInterfaceAttributeRequest[]> {
  const A = "ModifyNetworkInterfaceAttribute";
  checkId(A, "eniId", i?.eniId);
  i.groups?.forEach((g) => checkId(A, "security group id", g));
  const requests: sdk.ModifyNetworkInterfaceAttributeRequest[] = [];
  const base = { NetworkInterfaceId: i.eniId };
  if (i.groups) requests.push({ ...base, Groups: i.groups });
  if (i.sourceDestCheck !== undefined) {
    requests.push({ ...base, SourceDestCheck: { Value: i.sourceDestCheck } });
  }
  if (i.description !== undefined) {
    requests.push({ ...base, Description: { Value: i.description } });
  }
  if (i.deleteOnTermination !== undefined) {
    let attachmentId = i.attachmentId;
    if (!attachmentId) {
      const [eni] = await describeNetworkInterfaces(calls, { ids: [i.eniId] });
      attachmentId = eni?.attachment?.attachmentId;
      if (!attachmentId) {
        throw bad(A, `${i.eniId} is not attached: deleteOnTermination needs an attachment`);
      }
    }
    requests.push({
      ...base,
      Attachment: { AttachmentId: attachmentId, DeleteOnTermination: i.deleteOnTermination },
    });
  }
  if (requests.length === 0) throw bad(A, "nothing to modify: give at least one attribute");
  return requests;
}

/** AssignPrivateIpAddresses: `count` IPs, the given `ips`, or `prefixCount` /28 prefixes. */
export async function assignPrivateIpAddresses(
  calls: Ec2Caller,
  i: AssignInput,
): Promise<AssignedAddresses> {
  const A = "AssignPrivateIpAddresses";
  checkId(A, "eniId", i?.eniId);
  const given = [i.count !== undefined, i.ips !== undefined, i.prefixCount !== undefined]
    .filter(Boolean).length;
  if (given !== 1) throw bad(A, "give exactly one of count, ips, prefixCount");
  for (const k of ["count", "prefixCount"] as const) {
    const v = i[k];
    if (v !== undefined && (!Number.isInteger(v) || v < 1)) {
      throw bad(A, `${k} must be an integer >= 1, got ${v}`);
    }
  }
  if (i.ips && (i.ips.length === 0 || i.ips.some((ip) => !isIpv4(ip)))) {
    throw bad(A, `ips must be IPv4 addresses, got ${JSON.stringify(i.ips)}`);
  }
  const res = await calls.call<sdk.AssignPrivateIpAddressesResult>({
    action: A,
    eniIds: [i.eniId],
    command: () =>
      new sdk.AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: i.eniId,
        SecondaryPrivateIpAddressCount: i.count,
        PrivateIpAddresses: i.ips,
        Ipv4PrefixCount: i.prefixCount,
        AllowReassignment: i.allowReassignment,
      }),
  });
  return {
    ips: (res.AssignedPrivateIpAddresses ?? []).flatMap((a) =>
      a.PrivateIpAddress ? [a.PrivateIpAddress] : []
    ),
    prefixes: (res.AssignedIpv4Prefixes ?? []).flatMap((p) => p.Ipv4Prefix ? [p.Ipv4Prefix] : []),
  };
}

/** UnassignPrivateIpAddresses for IPs and/or prefixes (one request each). */
export async function unassignPrivateIpAddresses(
  calls: Ec2Caller,
  i: { eniId: string; ips?: string[]; prefixes?: string[] },
): Promise<void> {
  const A = "UnassignPrivateIpAddresses";
  checkId(A, "eniId", i?.eniId);
  if (!i.ips?.length && !i.prefixes?.length) throw bad(A, "give ips or prefixes to unassign");
  if (i.ips?.some((ip) => !isIpv4(ip))) {
    throw bad(A, `ips must be IPv4 addresses, got ${JSON.stringify(i.ips)}`);
  }
  if (i.prefixes?.some((p) => !/^\d+\.\d+\.\d+\.\d+\/28$/.test(p) || !isIpv4(p.slice(0, -3)))) {
    throw bad(A, `prefixes must be IPv4 /28 prefixes, got ${JSON.stringify(i.prefixes)}`);
  }
  const inputs: sdk.UnassignPrivateIpAddressesRequest[] = [];
  if (i.ips?.length) inputs.push({ NetworkInterfaceId: i.eniId, PrivateIpAddresses: i.ips });
  if (i.prefixes?.length) inputs.push({ NetworkInterfaceId: i.eniId, Ipv4Prefixes: i.prefixes });
  for (const input of inputs) {
    await calls.call({
      action: A,
      eniIds: [i.eniId],
      command: () => new sdk.UnassignPrivateIpAddressesCommand(input),
    });
  }
}

/** CreateTags on the given resources. */
export async function createTags(calls: Ec2Caller, ids: string[], tags: Tags): Promise<void> {
  const A = "CreateTags";
  if (!Array.isArray(ids) || ids.length === 0) throw bad(A, "give at least one resource id");
  ids.forEach((id) => checkId(A, "resource id", id));
  if (!tags || Object.keys(tags).length === 0) throw bad(A, "give at least one tag");
  await calls.call({
    action: A,
    eniIds: ids,
    command: () => new sdk.CreateTagsCommand({ Resources: ids, Tags: tagList(tags) }),
  });
}
