/**
 * The Describe actions of the simulator: ids, filters, pagination, and EC2's NotFound
 * errors for unknown ids. A new ENI stays hidden for `consistencyDelayMs`.
 *
 * @module
 */
import type { QueryParams } from "./query.ts";
import { matchesFilters, paginate, type QueryFilter } from "./query.ts";
import { SimError } from "./errors.ts";
import type { SimState, TypeLimits } from "./state.ts";
import { lookupTypeLimits } from "./state.ts";
import {
  el,
  instanceTypeXml,
  networkInterfaceXml,
  reservationXml,
  securityGroupXml,
  set,
  subnetXml,
  vpcXml,
} from "./ec2_xml.ts";
import {
  ENI_FILTERS,
  eniFields,
  INSTANCE_FILTERS,
  instanceFields,
  SG_FILTERS,
  SUBNET_FILTERS,
  subnetFields,
  TYPE_FILTERS,
  VPC_FILTERS,
} from "./ec2_filters.ts";
import { LIMITS_TABLE } from "../limits_table.ts";

/** Answers DryRunOperation when `DryRun=true`, after the parameters were checked. */
export function dryRun(q: QueryParams): void {
  if (q.bool("DryRun")) {
    throw new SimError(
      "DryRunOperation",
      "Request would have succeeded, but DryRun flag is set.",
      412,
    );
  }
}

function idsNotFound(code: string, kind: string, missing: string[]): SimError {
  return new SimError(
    code,
    missing.length === 1
      ? `The ${kind} ID '${missing[0]}' does not exist`
      : `The ${kind} IDs '${missing.join(", ")}' do not exist`,
  );
}

function checkMaxWithIds(q: QueryParams, idParam: string): void {
  if (q.has("MaxResults") && q.has(idParam)) {
    throw new SimError(
      "InvalidParameterCombination",
      `The parameter ${idParam} cannot be used with the parameter MaxResults`,
    );
  }
}

/** DescribeNetworkInterfaces. */
export function describeNetworkInterfaces(s: SimState, q: QueryParams): string {
  const ids = q.list("NetworkInterfaceId");
  const filters: QueryFilter[] = q.filters(ENI_FILTERS);
  checkMaxWithIds(q, "NetworkInterfaceId");
  const now = Date.now();
  let enis = [...s.enis.values()].filter((e) => s.isVisible(e, now));
  if (ids.length > 0) {
    const missing = ids.filter((id) => !enis.some((e) => e.id === id));
    if (missing.length > 0) {
      throw idsNotFound("InvalidNetworkInterfaceID.NotFound", "networkInterface", missing);
    }
    enis = enis.filter((e) => ids.includes(e.id));
  }
  enis = enis.filter((e) =>
    matchesFilters({ fields: eniFields(s, e), tags: e.tags }, filters, ENI_FILTERS)
  );
  dryRun(q);
  const { page, nextToken } = paginate(enis, q, { min: 5, max: 1000 });
  return set("networkInterfaceSet", page.map((e) => networkInterfaceXml(s, e))) +
    el("nextToken", nextToken);
}

/** DescribeSubnets. */
export function describeSubnets(s: SimState, q: QueryParams): string {
  const ids = q.list("SubnetId");
  const filters = q.filters(SUBNET_FILTERS);
  checkMaxWithIds(q, "SubnetId");
  let subnets = [...s.subnets.values()];
  if (ids.length > 0) {
    const missing = ids.filter((id) => !s.subnets.has(id));
    if (missing.length > 0) throw idsNotFound("InvalidSubnetID.NotFound", "subnet", missing);
    subnets = subnets.filter((x) => ids.includes(x.id));
  }
  subnets = subnets.filter((x) =>
    matchesFilters({ fields: subnetFields(s, x), tags: x.tags }, filters, SUBNET_FILTERS)
  );
  dryRun(q);
  const { page, nextToken } = paginate(subnets, q, { min: 5, max: 1000 });
  return set("subnetSet", page.map((x) => subnetXml(s, x))) + el("nextToken", nextToken);
}

/** DescribeVpcs. */
export function describeVpcs(s: SimState, q: QueryParams): string {
  const ids = q.list("VpcId");
  const filters = q.filters(VPC_FILTERS);
  const missing = ids.filter((id) => id !== s.vpc.id);
  if (missing.length > 0) throw idsNotFound("InvalidVpcID.NotFound", "vpc", missing);
  const fields = {
    "vpc-id": [s.vpc.id],
    "cidr": s.vpc.cidrs,
    "cidr-block-association.cidr-block": s.vpc.cidrs,
    "state": ["available"],
    "is-default": ["false"],
    "owner-id": [s.accountId],
  };
  const match = matchesFilters({ fields, tags: s.vpc.tags }, filters, VPC_FILTERS);
  dryRun(q);
  return set("vpcSet", match ? [vpcXml(s)] : []);
}

/** DescribeSecurityGroups. */
export function describeSecurityGroups(s: SimState, q: QueryParams): string {
  const ids = q.list("GroupId");
  const names = q.list("GroupName");
  const filters = q.filters(SG_FILTERS);
  let groups = [...s.securityGroups.values()];
  if (ids.length > 0) {
    const missing = ids.filter((id) => !s.securityGroups.has(id));
    if (missing.length > 0) {
      throw new SimError(
        "InvalidGroup.NotFound",
        `The security group '${missing.join(", ")}' does not exist`,
      );
    }
    groups = groups.filter((g) => ids.includes(g.id));
  }
  if (names.length > 0) {
    const missing = names.filter((n) => !groups.some((g) => g.name === n));
    if (missing.length > 0) {
      throw new SimError(
        "InvalidGroup.NotFound",
        `The security group '${missing.join(", ")}' does not exist`,
      );
    }
    groups = groups.filter((g) => names.includes(g.name));
  }
  groups = groups.filter((g) =>
    matchesFilters(
      {
        fields: {
          "group-id": [g.id],
          "group-name": [g.name],
          "vpc-id": [g.vpcId],
          "description": [g.description],
          "owner-id": [s.accountId],
        },
        tags: g.tags,
      },
      filters,
      SG_FILTERS,
    )
  );
  dryRun(q);
  const { page, nextToken } = paginate(groups, q, { min: 5, max: 1000 });
  return set("securityGroupInfo", page.map((g) => securityGroupXml(s, g))) +
    el("nextToken", nextToken);
}

/** DescribeInstances. */
export function describeInstances(s: SimState, q: QueryParams): string {
  const ids = q.list("InstanceId");
  checkMaxWithIds(q, "InstanceId");
  const filters = q.filters(INSTANCE_FILTERS);
  let insts = [...s.instances.values()];
  if (ids.length > 0) {
    for (const id of ids) s.instance(id);
    insts = insts.filter((i) => ids.includes(i.id));
  }
  insts = insts.filter((i) =>
    matchesFilters({ fields: instanceFields(s, i), tags: i.tags }, filters, INSTANCE_FILTERS)
  );
  dryRun(q);
  const { page, nextToken } = paginate(insts, q, { min: 5, max: 1000 });
  return set("reservationSet", page.map((i) => reservationXml(s, i))) + el("nextToken", nextToken);
}

/** DescribeInstanceTypes. */
export function describeInstanceTypes(s: SimState, q: QueryParams): string {
  const names = q.list("InstanceType");
  const filters = q.filters(TYPE_FILTERS);
  let types: TypeLimits[];
  if (names.length > 0) {
    const found = names.map((n) => lookupTypeLimits(n, s.scenario));
    const missing = names.filter((_, i) => !found[i]);
    if (missing.length > 0) {
      throw new SimError(
        "InvalidInstanceType",
        `The following supplied instance types do not exist: [${missing.join(", ")}]`,
      );
    }
    types = found as TypeLimits[];
  } else {
    const all = new Set([
      ...s.scenario.instanceTypes.map((t) => t.type),
      ...Object.keys(LIMITS_TABLE),
    ]);
    types = [...all].sort().map((n) => lookupTypeLimits(n, s.scenario)!);
  }
  types = types.filter((t) =>
    matchesFilters(
      {
        fields: {
          "instance-type": [t.type],
          "hypervisor": [t.hypervisor],
          "bare-metal": [String(t.bareMetal)],
          "network-info.maximum-network-interfaces": [String(t.maxEnis)],
          "network-info.ipv4-addresses-per-interface": [String(t.ipv4PerEni)],
        },
        tags: new Map(),
      },
      filters,
      TYPE_FILTERS,
    )
  );
  dryRun(q);
  const { page, nextToken } = paginate(types, q, { min: 5, max: 100, defaultMax: 100 });
  return set("instanceTypeSet", page.map(instanceTypeXml)) + el("nextToken", nextToken);
}
