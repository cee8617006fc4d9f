/**
 * The Describe actions of the EC2 client: each checks its query, builds the request of every
 * page and maps the answer to the plain types of `ec2_types.ts`. Sending the pages (with
 * throttling, retries and counters) is the client's: see {@linkcode Ec2Caller.pages}.
 *
 * @module
 */
import * as sdk from "@aws-sdk/client-ec2";
import type { Ec2Caller } from "./ec2_call.ts";
import type { FilteredAction } from "./ec2_filter_names.ts";
import {
  bad,
  checkId,
  checkQueryFields,
  type DescribeQuery,
  type FieldFilter,
  toFilters,
} from "./ec2_input.ts";
import {
  type Instance,
  type InstanceTypeInfo,
  type NetworkInterface,
  type SecurityGroup,
  type Subnet,
  toInstance,
  toInstanceTypeInfo,
  toNetworkInterface,
  toSecurityGroup,
  toSubnet,
  toVpc,
  type Vpc,
} from "./ec2_types.ts";

/** DescribeInstanceTypes for the given types, or every type when none is given. */
export function describeInstanceTypes(
  calls: Ec2Caller,
  types: string[],
): Promise<InstanceTypeInfo[]> {
  const A = "DescribeInstanceTypes";
  if (
    !Array.isArray(types) ||
    types.some((t) => typeof t !== "string" || !/^[a-z0-9-]+\.[a-z0-9-]+$/.test(t))
  ) {
    return Promise.reject(
      bad(A, `instance types must look like 'm5.large', got ${JSON.stringify(types)}`),
    );
  }
  const paged = types.length === 0;
  return calls.pages<sdk.DescribeInstanceTypesResult, InstanceTypeInfo>({
    action: A,
    command: (NextToken) =>
      new sdk.DescribeInstanceTypesCommand({
        InstanceTypes: paged ? undefined : types as sdk._InstanceType[],
        // This action pages by at most 100, unlike the others.
        MaxResults: paged ? Math.min(100, calls.pageSize) : undefined,
        NextToken,
      }),
    items: (o) => (o.InstanceTypes ?? []).map(toInstanceTypeInfo),
  });
}

/** DescribeInstances; the instances of every reservation, flattened. */
export function describeInstances(calls: Ec2Caller, q: DescribeQuery): Promise<Instance[]> {
  return describeByQuery(calls, q, {
    action: "DescribeInstances",
    idName: "instance id",
    command: (InstanceIds, page) => new sdk.DescribeInstancesCommand({ InstanceIds, ...page }),
    items: (o: sdk.DescribeInstancesResult) =>
      (o.Reservations ?? []).flatMap((r) => (r.Instances ?? []).map(toInstance)),
  });
}

/** DescribeSubnets by ids, VPC, AZ, filters and tags. */
export function describeSubnets(
  calls: Ec2Caller,
  q: DescribeQuery & { vpcId?: string; az?: string },
): Promise<Subnet[]> {
  return describeByQuery(calls, q, {
    action: "DescribeSubnets",
    idName: "subnet id",
    fields: {
      vpcId: { filter: "vpc-id", field: "vpcId", values: one(q.vpcId) },
      az: { filter: "availability-zone", field: "az", values: one(q.az) },
    },
    command: (SubnetIds, page) => new sdk.DescribeSubnetsCommand({ SubnetIds, ...page }),
    items: (o: sdk.DescribeSubnetsResult) => (o.Subnets ?? []).map(toSubnet),
  });
}

/**
 * DescribeNetworkInterfaces by ids, attached instance, subnet, filters and tags. With
 * `ignoreMissing`, ids EC2 does not know are left out instead of failing the call.
 */
export async function describeNetworkInterfaces(
  calls: Ec2Caller,
  q: DescribeQuery & { instanceId?: string; subnetId?: string; ignoreMissing?: boolean },
): Promise<NetworkInterface[]> {
  const A = "DescribeNetworkInterfaces";
  checkQueryFields(A, q, ["instanceId", "subnetId", "ignoreMissing"]);
  q.ids?.forEach((id) => checkId(A, "ENI id", id));
  // By id, one unknown id fails the whole call; as a filter, unknown ids are just absent.
  const asFilter = !!q.ignoreMissing && !!q.ids?.length;
  const filters = toFilters(A, q, [
    { filter: "attachment.instance-id", field: "instanceId", values: one(q.instanceId) },
    { filter: "subnet-id", field: "subnetId", values: one(q.subnetId) },
    { filter: "network-interface-id", field: "ids", values: asFilter ? q.ids : undefined },
  ]);
  const ids = asFilter ? undefined : q.ids;
  return await describePages(calls, A, ids, filters, {
    command: (NetworkInterfaceIds, page) =>
      new sdk.DescribeNetworkInterfacesCommand({ NetworkInterfaceIds, ...page }),
    items: (o: sdk.DescribeNetworkInterfacesResult) =>
      (o.NetworkInterfaces ?? []).map(toNetworkInterface),
    eniIds: ids,
  });
}

/** DescribeVpcs; each VPC with all its associated IPv4 CIDRs. */
export function describeVpcs(calls: Ec2Caller, q: DescribeQuery): Promise<Vpc[]> {
  return describeByQuery(calls, q, {
    action: "DescribeVpcs",
    idName: "VPC id",
    command: (VpcIds, page) => new sdk.DescribeVpcsCommand({ VpcIds, ...page }),
    items: (o: sdk.DescribeVpcsResult) => (o.Vpcs ?? []).map(toVpc),
  });
}

/** DescribeSecurityGroups by ids, VPC, filters and tags. */
export function describeSecurityGroups(
  calls: Ec2Caller,
  q: DescribeQuery & { vpcId?: string },
): Promise<SecurityGroup[]> {
  return describeByQuery(calls, q, {
    action: "DescribeSecurityGroups",
    idName: "security group id",
    fields: { vpcId: { filter: "vpc-id", field: "vpcId", values: one(q.vpcId) } },
    command: (GroupIds, page) => new sdk.DescribeSecurityGroupsCommand({ GroupIds, ...page }),
    items: (o: sdk.DescribeSecurityGroupsResult) => (o.SecurityGroups ?? []).map(toSecurityGroup),
  });
}

/** The paging fields every page of a Describe by ids or filters carries. */
interface Page {
  Filters: sdk.Filter[] | undefined;
  MaxResults: number | undefined;
  NextToken: string | undefined;
}

/** How the pages of one Describe by ids or filters are asked for and read. */
interface PageRequest<O, R> {
  /** The request of one page: the ids in the action's own id list, and the paging fields. */
  command: (ids: string[] | undefined, page: Page) => unknown;
  items: (o: O) => R[];
  /** Ids whose NotFound is waited out while this client just created them. */
  eniIds?: string[];
}

/** A one-value filter for a query field, or undefined when the field is not given. */
function one(v: string | undefined): string[] | undefined {
  return v === undefined ? undefined : [v];
}

/**
 * A Describe whose query is just ids, filters and tags (plus `fields`, the action's own query
 * fields and the filters they stand for). The query's fields and ids are checked first; a bad
 * one rejects the promise, it never throws.
 */
async function describeByQuery<O extends { NextToken?: string }, R>(
  calls: Ec2Caller,
  q: DescribeQuery,
  d: PageRequest<O, R> & {
    action: FilteredAction;
    /** What the action's ids are called in an InvalidInput message. */
    idName: string;
    /** The action's own query fields, by name. */
    fields?: Record<string, FieldFilter>;
  },
): Promise<R[]> {
  checkQueryFields(d.action, q, Object.keys(d.fields ?? {}));
  q.ids?.forEach((id) => checkId(d.action, d.idName, id));
  const filters = toFilters(d.action, q, Object.values(d.fields ?? {}));
  return await describePages(calls, d.action, q.ids, filters, d);
}

/**
 * Every page of a Describe by ids or filters. A request with ids is not paged by size: some
 * of these actions refuse `MaxResults` together with ids.
 */
function describePages<O extends { NextToken?: string }, R>(
  calls: Ec2Caller,
  action: string,
  ids: string[] | undefined,
  filters: sdk.Filter[] | undefined,
  r: PageRequest<O, R>,
): Promise<R[]> {
  const byId = !!ids?.length;
  return calls.pages<O, R>({
    action,
    command: (NextToken) =>
      r.command(ids, {
        Filters: filters,
        MaxResults: byId ? undefined : calls.pageSize,
        NextToken,
      }),
    items: r.items,
    eniIds: r.eniIds,
  });
}
