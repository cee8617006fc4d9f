/**
 * Reading EC2 Query API parameters: numbered lists (`X.1`, `X.2`), filters
 * (`Filter.N.Name` / `Filter.N.Value.M`), tags, integers and booleans, with EC2's errors
 * for missing or malformed values; and matching filters against resources.
 *
 * @module
 */
import { invalidValue, missingParameter, SimError } from "./errors.ts";
import { isTagFilter } from "../ec2_filter_names.ts";

/** One `Filter.N`. */
export interface QueryFilter {
  name: string;
  values: string[];
}

/** The parameters of one request, with typed readers. */
export class QueryParams {
  readonly #p: Map<string, string>;
  constructor(params: URLSearchParams | Map<string, string>) {
    this.#p = params instanceof Map ? params : new Map(params);
  }

  /** The raw value, or undefined. */
  get(name: string): string | undefined {
    return this.#p.get(name);
  }

  /** The value, or MissingParameter. */
  required(name: string): string {
    const v = this.#p.get(name);
    if (v === undefined || v === "") throw missingParameter(name);
    return v;
  }

  /** An integer, or InvalidParameterValue when present but not one. */
  int(name: string, o: { min?: number; max?: number } = {}): number | undefined {
    const v = this.#p.get(name);
    if (v === undefined) return undefined;
    if (!/^-?\d+$/.test(v)) {
      throw invalidValue(`Value (${v}) for parameter ${name} is invalid. Expected an integer.`);
    }
    const n = Number(v);
    if ((o.min !== undefined && n < o.min) || (o.max !== undefined && n > o.max)) {
      throw invalidValue(
        `Value (${v}) for parameter ${name} is invalid. Must be between ${o.min ?? "-"} and ${
          o.max ?? "-"
        }.`,
      );
    }
    return n;
  }

  /** A boolean (`true`/`false`), or InvalidParameterValue. */
  bool(name: string): boolean | undefined {
    const v = this.#p.get(name);
    if (v === undefined) return undefined;
    if (v !== "true" && v !== "false") {
      throw invalidValue(
        `Value (${v}) for parameter ${name} is invalid. Expected 'true' or 'false'.`,
      );
    }
    return v === "true";
  }

  /** The values of `prefix.1`, `prefix.2`, … in numeric order. */
  list(prefix: string): string[] {
    const out: [number, string][] = [];
    const re = new RegExp(`^${prefix.replaceAll(".", "\\.")}\\.(\\d+)$`);
    for (const [k, v] of this.#p) {
      const m = re.exec(k);
      if (m) out.push([Number(m[1]), v]);
    }
    return out.sort((a, b) => a[0] - b[0]).map(([, v]) => v);
  }

  /** The numbered sub-structures `prefix.N.*`, each as its own QueryParams, in order. */
  structs(prefix: string): QueryParams[] {
    const groups = new Map<number, Map<string, string>>();
    const head = prefix + ".";
    for (const [k, v] of this.#p) {
      if (!k.startsWith(head)) continue;
      const rest = k.slice(head.length);
      const dot = rest.indexOf(".");
      if (dot < 0 || !/^\d+$/.test(rest.slice(0, dot))) continue;
      const n = Number(rest.slice(0, dot));
      if (!groups.has(n)) groups.set(n, new Map());
      groups.get(n)!.set(rest.slice(dot + 1), v);
    }
    return [...groups].sort((a, b) => a[0] - b[0]).map(([, m]) => new QueryParams(m));
  }

  /**
   * `Filter.N.Name` / `Filter.N.Value.M`. A name outside `known` (and not a tag filter) is
   * InvalidParameterValue before anything is matched, as on EC2, where the check does not
   * depend on whether any resource exists.
   */
  filters(known: ReadonlySet<string>): QueryFilter[] {
    return this.structs("Filter").map((f) => {
      const name = f.get("Name");
      if (!name) throw missingParameter("Filter.N.Name");
      if (!known.has(name) && !isTagFilter(name)) throw unknownFilter(name);
      return { name, values: f.list("Value") };
    });
  }

  /** `prefix.N.Key` / `prefix.N.Value` as a record. */
  tags(prefix: string): Record<string, string> {
    const out: Record<string, string> = {};
    for (const t of this.structs(prefix)) {
      const key = t.get("Key");
      if (key === undefined || key === "") throw missingParameter(`${prefix}.N.Key`);
      if (key.toLowerCase().startsWith("aws:")) {
        throw invalidValue(`Tag keys starting with 'aws:' are reserved for internal use`);
      }
      out[key] = t.get("Value") ?? "";
    }
    return out;
  }

  /** Every parameter name. */
  names(): string[] {
    return [...this.#p.keys()];
  }

  /** True when any parameter name starts with `prefix`. */
  has(prefix: string): boolean {
    for (const k of this.#p.keys()) if (k === prefix || k.startsWith(prefix + ".")) return true;
    return false;
  }
}

/** EC2's answer to a filter name the action does not take. */
function unknownFilter(name: string): SimError {
  return new SimError("InvalidParameterValue", `The filter '${name}' is invalid`);
}

const globCache = new Map<string, RegExp>();

function globMatch(pattern: string, value: string): boolean {
  if (!pattern.includes("*") && !pattern.includes("?")) return pattern === value;
  let re = globCache.get(pattern);
  if (!re) {
    re = new RegExp(
      "^" +
        pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replaceAll("*", ".*").replaceAll("?", ".") +
        "$",
    );
    globCache.set(pattern, re);
  }
  return re.test(value);
}

/** Field values of one resource for filtering, plus its tags. */
export interface Filterable {
  fields: Record<string, string[]>;
  tags: Map<string, string>;
}

/**
 * True when the resource matches every filter (values of one filter are OR-ed, filters
 * AND-ed; `*` and `?` are wildcards). An unknown filter name is InvalidParameterValue.
 */
export function matchesFilters(
  r: Filterable,
  filters: QueryFilter[],
  known: ReadonlySet<string>,
): boolean {
  for (const f of filters) {
    let values: string[];
    if (f.name.startsWith("tag:")) {
      const v = r.tags.get(f.name.slice(4));
      values = v === undefined ? [] : [v];
    } else if (f.name === "tag-key") {
      values = [...r.tags.keys()];
    } else if (f.name === "tag-value") {
      values = [...r.tags.values()];
    } else if (known.has(f.name)) {
      values = r.fields[f.name] ?? [];
    } else {
      throw unknownFilter(f.name);
    }
    if (!f.values.some((p) => values.some((v) => globMatch(p, v)))) return false;
  }
  return true;
}

/** Applies MaxResults/NextToken to a list; the token is an opaque offset. */
export function paginate<T>(
  items: T[],
  q: QueryParams,
  o: { min: number; max: number; defaultMax?: number },
): {
  page: T[];
  nextToken?: string;
} {
  const max = q.int("MaxResults", { min: o.min, max: o.max }) ?? o.defaultMax;
  const tokenText = q.get("NextToken");
  let start = 0;
  if (tokenText !== undefined) {
    let decoded = "";
    try {
      decoded = atob(tokenText);
    } catch { /* reported below */ }
    const m = /^offset:(\d+)$/.exec(decoded);
    if (!m) throw new SimError("InvalidPaginationToken", `Invalid pagination token: ${tokenText}`);
    start = Number(m[1]);
  }
  if (max === undefined) return { page: items.slice(start) };
  const page = items.slice(start, start + max);
  const next = start + max < items.length ? btoa(`offset:${start + max}`) : undefined;
  return { page, nextToken: next };
}
