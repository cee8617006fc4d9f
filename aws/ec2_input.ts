/**
 * Inputs of the EC2 client's actions and their checks: bad input is refused with an
 * `InvalidInput` error naming the field, before any request is sent.
 *
 * @module
 */
import type * as sdk from "@aws-sdk/client-ec2";
import { Ec2Error } from "./ec2_errors.ts";
import type { Tags } from "./ec2_types.ts";
export { isIpv4 } from "../netlink/ipv4.ts";

/** Common selectors of Describe calls. */
export interface DescribeQuery {
  ids?: string[];
  /** EC2 filters by name, e.g. `{ "vpc-id": ["vpc-1"] }`. */
  filters?: Record<string, string[]>;
  /** Tag selectors: `{ zone: "internal" }` or `{ zone: ["a", "b"] }`; `"*"` matches any value. */
  tags?: Record<string, string | string[]>;
}

/** Options of {@linkcode Ec2Client.createNetworkInterface}. */
export interface CreateNetworkInterfaceInput {
  subnetId: string;
  securityGroupIds: string[];
  description?: string;
  tags?: Tags;
  /** Idempotency token; one is generated (and reused by every retry) when absent. */
  clientToken?: string;
  /** Secondary private IPs to assign at creation. */
  secondaryIpCount?: number;
  /** /28 prefixes to delegate at creation. */
  prefixCount?: number;
}

/** Options of {@linkcode Ec2Client.assignPrivateIpAddresses}: exactly one of the three. */
export interface AssignInput {
  eniId: string;
  count?: number;
  ips?: string[];
  prefixCount?: number;
  /** Let EC2 move the given IPs from another ENI. */
  allowReassignment?: boolean;
}

/** Options of {@linkcode Ec2Client.modifyNetworkInterfaceAttribute}: at least one attribute. */
export interface ModifyNetworkInterfaceInput {
  eniId: string;
  /** Needs the attachment: `attachmentId`, or the one EC2 reports for the ENI. */
  deleteOnTermination?: boolean;
  attachmentId?: string;
  groups?: string[];
  sourceDestCheck?: boolean;
  description?: string;
}

const RESOURCE_ID = /^[a-z]+(-[a-z]+)*-[0-9a-f]{8,17}$/;

/** Throws an InvalidInput {@linkcode Ec2Error} unless `id` looks like an EC2 resource id. */
export function checkId(action: string, what: string, id: unknown): void {
  if (typeof id !== "string" || !RESOURCE_ID.test(id)) {
    throw new Ec2Error({
      action,
      code: "InvalidInput",
      message: `${what} must look like 'eni-0123456789abcdef0', got ${JSON.stringify(id)}`,
    });
  }
}

/** An InvalidInput {@linkcode Ec2Error}: refused before any request. */
export function bad(action: string, message: string): Ec2Error {
  return new Ec2Error({ action, code: "InvalidInput", message });
}

/** EC2 filters for a query: its filters, the given extras, and tag selectors. */
export function toFilters(q: DescribeQuery, extra: Record<string, string[] | undefined> = {}) {
  const out: sdk.Filter[] = [];
  for (const [Name, Values] of Object.entries({ ...q.filters, ...extra })) {
    if (Values) out.push({ Name, Values });
  }
  for (const [k, v] of Object.entries(q.tags ?? {})) {
    const values = Array.isArray(v) ? v : [v];
    out.push(
      values.length === 1 && values[0] === "*"
        ? { Name: "tag-key", Values: [k] }
        : { Name: `tag:${k}`, Values: values },
    );
  }
  return out.length ? out : undefined;
}
