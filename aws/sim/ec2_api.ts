/**
 * The EC2 Query API of the simulator: one handler per action, reading form parameters and
 * answering with EC2's XML documents (or EC2's error document).
 *
 * @module
 */
import type { QueryParams } from "./query.ts";
import { invalidValue, missingParameter, SimError } from "./errors.ts";
import type { SimState } from "./state.ts";
import { el, networkInterfaceXml, set } from "./ec2_xml.ts";
import type { ActionCategory } from "./faults.ts";
import {
  describeInstances,
  describeInstanceTypes,
  describeNetworkInterfaces,
  describeSecurityGroups,
  describeSubnets,
  describeVpcs,
  dryRun,
} from "./ec2_describe.ts";

/** What one handler produces: the inner XML of `<ActionResponse>`. */
type Handler = (s: SimState, q: QueryParams) => string;

/** An HTTP answer. */
export interface Ec2Answer {
  status: number;
  body: string;
  /** The EC2 error code, when the answer is an error. */
  code?: string;
}

const XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/";

/** Renders a success document. */
export function successXml(action: string, requestId: string, inner: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${action}Response xmlns="${XMLNS}">` +
    `<requestId>${requestId}</requestId>${inner}</${action}Response>`;
}

/** Renders EC2's error document. */
export function errorXml(code: string, message: string, requestId: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>${el("Code", code)}` +
    `${el("Message", message)}</Error></Errors>${el("RequestID", requestId)}</Response>`;
}

/** The request-rate category of a request (for throttling). */
export function categoryOf(action: string, q: QueryParams): ActionCategory {
  if (!action.startsWith("Describe")) return "mutating";
  const narrowed = q.has("Filter") || q.has("MaxResults") || q.has("NextToken") ||
    [
      "NetworkInterfaceId",
      "SubnetId",
      "InstanceId",
      "InstanceType",
      "VpcId",
      "GroupId",
      "GroupName",
    ]
      .some((p) => q.has(p));
  return narrowed ? "nonMutating" : "unfilteredNonMutating";
}

/** True when the sim serves this action. */
export function isKnownAction(action: string): boolean {
  return action in HANDLERS;
}

/** Runs one EC2 request against the state. Never throws: errors become error documents. */
export function handleEc2(state: SimState, q: QueryParams, requestId: string): Ec2Answer {
  const action = q.get("Action");
  try {
    if (!action) throw missingParameter("Action");
    const handler = HANDLERS[action];
    if (!handler) {
      throw new SimError(
        "InvalidAction",
        `The action ${action} is not valid for this web service.`,
      );
    }
    if (!q.get("Version")) throw missingParameter("Version");
    checkParameterNames(action, q);
    const inner = handler(state, q);
    return { status: 200, body: successXml(action, requestId, inner) };
  } catch (e) {
    if (e instanceof SimError) {
      return { status: e.status, body: errorXml(e.code, e.message, requestId), code: e.code };
    }
    return {
      status: 500,
      body: errorXml(
        "InternalError",
        `An internal error has occurred: ${(e as Error).message}`,
        requestId,
      ),
      code: "InternalError",
    };
  }
}

function tagsFromSpecs(q: QueryParams, resourceType: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const spec of q.structs("TagSpecification")) {
    const rt = spec.get("ResourceType");
    if (rt !== resourceType) {
      throw invalidValue(`'${rt ?? ""}' is not a valid taggable resource type for this operation.`);
    }
    Object.assign(out, spec.tags("Tag"));
  }
  return out;
}

function createNetworkInterface(s: SimState, q: QueryParams): string {
  const subnetId = q.required("SubnetId");
  const groupIds = q.list("SecurityGroupId");
  const secondaryCount = q.int("SecondaryPrivateIpAddressCount", { min: 0, max: 1000 });
  // PrivateIpAddresses.N.{PrivateIpAddress,Primary}: explicit addresses, at most one primary.
  let privateIp = q.get("PrivateIpAddress");
  const secondaryIps: string[] = [];
  for (const spec of q.structs("PrivateIpAddresses")) {
    const ip = spec.required("PrivateIpAddress");
    if (spec.bool("Primary")) {
      if (privateIp !== undefined && privateIp !== ip) {
        throw invalidValue("Only one primary private IP address can be specified");
      }
      privateIp = ip;
    } else {
      secondaryIps.push(ip);
    }
  }
  const prefixCount = q.int("Ipv4PrefixCount", { min: 0, max: 1000 });
  const tags = tagsFromSpecs(q, "network-interface");
  const clientToken = q.get("ClientToken");
  if (clientToken !== undefined && clientToken.length > 64) {
    throw invalidValue("ClientToken must be at most 64 characters");
  }
  s.subnet(subnetId);
  s.checkGroups(groupIds);
  dryRun(q);
  const eni = s.createNetworkInterface({
    subnetId,
    groupIds,
    description: q.get("Description"),
    privateIp,
    secondaryIps,
    secondaryCount,
    prefixCount,
    tags,
    clientToken,
  });
  return `<networkInterface>${networkInterfaceXml(s, eni)}</networkInterface>` +
    el("clientToken", clientToken);
}

function attachNetworkInterface(s: SimState, q: QueryParams): string {
  const eniId = q.required("NetworkInterfaceId");
  const instanceId = q.required("InstanceId");
  if (q.get("DeviceIndex") === undefined) throw missingParameter("DeviceIndex");
  const deviceIndex = q.int("DeviceIndex", { min: 0, max: 255 })!;
  const cardIndex = q.int("NetworkCardIndex", { min: 0, max: 255 }) ?? 0;
  s.eni(eniId);
  s.instance(instanceId);
  dryRun(q);
  const att = s.attachNetworkInterface(eniId, instanceId, deviceIndex, cardIndex);
  return el("attachmentId", att.id) + el("networkCardIndex", att.networkCardIndex);
}

function detachNetworkInterface(s: SimState, q: QueryParams): string {
  const attachmentId = q.required("AttachmentId");
  const force = q.bool("Force") ?? false;
  dryRun(q);
  s.detachNetworkInterface(attachmentId, force);
  return el("return", true);
}

function deleteNetworkInterface(s: SimState, q: QueryParams): string {
  const eniId = q.required("NetworkInterfaceId");
  s.eni(eniId);
  dryRun(q);
  s.deleteNetworkInterface(eniId);
  return el("return", true);
}

function modifyNetworkInterfaceAttribute(s: SimState, q: QueryParams): string {
  const eniId = q.required("NetworkInterfaceId");
  const groups = q.has("SecurityGroupId") ? q.list("SecurityGroupId") : undefined;
  const description = q.get("Description.Value");
  const sdc = q.bool("SourceDestCheck.Value");
  const attachmentId = q.get("Attachment.AttachmentId");
  const dot = q.bool("Attachment.DeleteOnTermination");
  const given = [groups, description, sdc, dot].filter((x) => x !== undefined).length;
  if (given === 0) {
    throw new SimError(
      "MissingParameter",
      "The request must contain exactly one attribute to modify",
    );
  }
  if (given > 1) {
    throw new SimError(
      "InvalidParameterCombination",
      "Only one attribute can be modified at a time",
    );
  }
  if (dot !== undefined && attachmentId === undefined) {
    throw missingParameter("Attachment.AttachmentId");
  }
  s.eni(eniId);
  dryRun(q);
  s.modifyNetworkInterfaceAttribute(eniId, {
    groups,
    description,
    sourceDestCheck: sdc,
    attachmentId,
    deleteOnTermination: dot,
  });
  return el("return", true);
}

function assignPrivateIpAddresses(s: SimState, q: QueryParams): string {
  const eniId = q.required("NetworkInterfaceId");
  const count = q.int("SecondaryPrivateIpAddressCount", { min: 1, max: 1000 });
  const prefixCount = q.int("Ipv4PrefixCount", { min: 1, max: 1000 });
  const ips = q.list("PrivateIpAddress");
  const prefixes = q.list("Ipv4Prefix");
  s.eni(eniId);
  dryRun(q);
  const r = s.assignPrivateIps(eniId, {
    count,
    ips,
    prefixCount,
    prefixes,
    allowReassignment: q.bool("AllowReassignment") ?? false,
  });
  return el("networkInterfaceId", eniId) +
    set("assignedPrivateIpAddressesSet", r.ips.map((ip) => el("privateIpAddress", ip))) +
    set("assignedIpv4PrefixSet", r.prefixes.map((p) => el("ipv4Prefix", p)));
}

function unassignPrivateIpAddresses(s: SimState, q: QueryParams): string {
  const eniId = q.required("NetworkInterfaceId");
  s.eni(eniId);
  dryRun(q);
  s.unassignPrivateIps(eniId, { ips: q.list("PrivateIpAddress"), prefixes: q.list("Ipv4Prefix") });
  return el("return", true);
}

function createTags(s: SimState, q: QueryParams): string {
  const ids = q.list("ResourceId");
  if (ids.length === 0) throw missingParameter("ResourceId.1");
  const tags = q.tags("Tag");
  if (Object.keys(tags).length === 0) throw missingParameter("Tag.1.Key");
  dryRun(q);
  s.createTags(ids, tags);
  return el("return", true);
}

const HANDLERS: Record<string, Handler> = {
  DescribeNetworkInterfaces: describeNetworkInterfaces,
  DescribeSubnets: describeSubnets,
  DescribeVpcs: describeVpcs,
  DescribeSecurityGroups: describeSecurityGroups,
  DescribeInstances: describeInstances,
  DescribeInstanceTypes: describeInstanceTypes,
  CreateNetworkInterface: createNetworkInterface,
  AttachNetworkInterface: attachNetworkInterface,
  DetachNetworkInterface: detachNetworkInterface,
  DeleteNetworkInterface: deleteNetworkInterface,
  ModifyNetworkInterfaceAttribute: modifyNetworkInterfaceAttribute,
  AssignPrivateIpAddresses: assignPrivateIpAddresses,
  UnassignPrivateIpAddresses: unassignPrivateIpAddresses,
  CreateTags: createTags,
};

const PAGED = ["Filter", "MaxResults", "NextToken"];

/** Parameter roots (the part before the first dot) each action takes, as EC2 names them. */
const PARAMETERS: Record<string, string[]> = {
  DescribeNetworkInterfaces: ["NetworkInterfaceId", ...PAGED],
  DescribeSubnets: ["SubnetId", ...PAGED],
  DescribeVpcs: ["VpcId", ...PAGED],
  DescribeSecurityGroups: ["GroupId", "GroupName", ...PAGED],
  DescribeInstances: ["InstanceId", ...PAGED],
  DescribeInstanceTypes: ["InstanceType", ...PAGED],
  CreateNetworkInterface: [
    "SubnetId",
    "Description",
    "PrivateIpAddress",
    "PrivateIpAddresses",
    "SecurityGroupId",
    "SecondaryPrivateIpAddressCount",
    "Ipv4PrefixCount",
    "TagSpecification",
    "ClientToken",
  ],
  AttachNetworkInterface: ["NetworkInterfaceId", "InstanceId", "DeviceIndex", "NetworkCardIndex"],
  DetachNetworkInterface: ["AttachmentId", "Force"],
  DeleteNetworkInterface: ["NetworkInterfaceId"],
  ModifyNetworkInterfaceAttribute: [
    "NetworkInterfaceId",
    "Description",
    "SourceDestCheck",
    "SecurityGroupId",
    "Attachment",
  ],
  AssignPrivateIpAddresses: [
    "NetworkInterfaceId",
    "PrivateIpAddress",
    "SecondaryPrivateIpAddressCount",
    "AllowReassignment",
    "Ipv4Prefix",
    "Ipv4PrefixCount",
  ],
  UnassignPrivateIpAddresses: ["NetworkInterfaceId", "PrivateIpAddress", "Ipv4Prefix"],
  CreateTags: ["ResourceId", "Tag"],
};

/** Real EC2 parameters of these actions that the simulator does not model. */
const UNMODELLED = new Set([
  "Ipv4Prefix",
  "Ipv6Addresses",
  "Ipv6AddressCount",
  "Ipv6Prefix",
  "Ipv6PrefixCount",
  "InterfaceType",
  "EnablePrimaryIpv6",
  "ConnectionTrackingSpecification",
  "Operator",
  "EnaSrdSpecification",
  "EnaQueueCount",
  "AssociatePublicIpAddress",
  "AssociatedSubnetId",
]);

const COMMON = new Set(["Action", "Version", "DryRun"]);

/** EC2 answers UnknownParameter for a name an action does not take; say so, too, for ones we do not model. */
function checkParameterNames(action: string, q: QueryParams): void {
  const allowed = PARAMETERS[action];
  for (const name of q.names()) {
    const root = name.split(".")[0];
    if (COMMON.has(root) || allowed.includes(root) || root.startsWith("X-Amz-")) continue;
    if (UNMODELLED.has(root)) {
      throw invalidValue(
        `The parameter ${root} is valid for ${action} but the simulator does not model it`,
      );
    }
    throw new SimError("UnknownParameter", `The parameter ${name} is not recognized`);
  }
}
