/**
 * Inputs of the EC2 client's actions and their checks: bad input is refused with an
 * `InvalidInput` error naming the field, before any request is sent.
 *
 * @module
 */
import type * as sdk from "@aws-sdk/client-ec2";
import { Ec2Error, Ec2FilterError } from "./ec2_errors.ts";
import { FILTER_NAMES, type FilteredAction, isTagFilter } from "./ec2_filter_names.ts";
import type { Tags } from "./ec2_types.ts";
export { isIpv4 } from "../base/ipv4.ts";

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

/** A filter one of an action's own query fields stands for, e.g. `subnetId` → `subnet-id`. */
export interface FieldFilter {
  /** The EC2 filter name. */
  filter: string;
  /** The query field that carries it, named in errors. */
  field: string;
  /** Its values; undefined when the field was not given. */
  values: string[] | undefined;
}

/**
 * The EC2 filters of a query of `action`: the caller's `filters`, the filters the action's own
 * fields stand for, and the tag selectors. Each one given goes into the request; a name the
 * action does not take, a value that is not a non-empty list of strings, or a filter given twice
 * (say `subnetId` and `filters["subnet-id"]`) is an {@linkcode Ec2FilterError} naming it.
 */
export function toFilters(
  action: FilteredAction,
  q: DescribeQuery,
  fields: FieldFilter[] = [],
): sdk.Filter[] | undefined {
  const refuse = (filter: string, message: string) => {
    throw new Ec2FilterError({ action, filter, message });
  };
  const out: sdk.Filter[] = [];
  /** Filter name → where it came from, to refuse a second one. */
  const from = new Map<string, string>();
  const add = (Name: string, Values: string[], source: string) => {
    const earlier = from.get(Name);
    if (earlier) refuse(Name, `filter '${Name}' is given twice (${earlier} and ${source})`);
    from.set(Name, source);
    out.push({ Name, Values });
  };
  for (const f of fields) if (f.values) add(f.filter, f.values, f.field);
  const given = q.filters;
  if (
    given !== undefined && (given === null || typeof given !== "object" || Array.isArray(given))
  ) {
    refuse(
      "filters",
      `filters must be an object of filter name → values, e.g. { "subnet-id": ["subnet-0a1b2c3d"] }, got ${
        Array.isArray(given) ? "an array" : JSON.stringify(given)
      }`,
    );
  }
  for (const [name, values] of Object.entries(given ?? {})) {
    if (!FILTER_NAMES[action].has(name) && !isTagFilter(name)) {
      refuse(
        name,
        `${action} cannot filter by '${name}'; it takes ${
          [...FILTER_NAMES[action]].join(", ")
        }, tag:<key>, tag-key and tag-value`,
      );
    }
    if (
      !Array.isArray(values) || values.length === 0 || values.some((v) => typeof v !== "string")
    ) {
      refuse(
        name,
        `filter '${name}' needs a non-empty list of strings, got ${JSON.stringify(values)}`,
      );
    }
    add(name, values, `filters["${name}"]`);
  }
  for (const [k, v] of Object.entries(q.tags ?? {})) {
    const values = Array.isArray(v) ? v : [v];
    if (k === "" || values.length === 0 || values.some((x) => typeof x !== "string")) {
      refuse(
        `tag:${k}`,
        `tag selector '${k}' needs a non-empty key and a string or a non-empty list of strings, got ${
          JSON.stringify(v)
        }`,
      );
    }
    // `*` matches any value, so `{ k: "*" }` selects by the key alone, and every selector keeps
    // a filter name of its own.
    add(`tag:${k}`, values, `tags["${k}"]`);
  }
  return out.length ? out : undefined;
}

/**
 * Refuses query fields `action` does not know (say `Filters` for `filters`), which would
 * otherwise be dropped without a word.
 */
export function checkQueryFields(action: string, q: object, known: string[]): void {
  if (q === null || typeof q !== "object" || Array.isArray(q)) {
    throw bad(action, `the query must be an object, got ${JSON.stringify(q)}`);
  }
  const all = ["ids", "filters", "tags", ...known];
  for (const k of Object.keys(q)) {
    if (!all.includes(k)) {
      throw bad(action, `unknown query field '${k}'; ${action} takes ${all.join(", ")}`);
    }
  }
}
