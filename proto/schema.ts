/**
 * A tiny parser toolkit for the plugin's hot path, where npm (zod) is too slow to load.
 * Each parser turns `unknown` JSON into a typed value or throws a {@linkcode CniError}
 * naming the field by its path (`ipam.type`, `prevResult.ips[0].address`): code 7 for a
 * missing or wrongly typed field, code 2 for a field the plugin does not support.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";
import { isIpv4 } from "../base/ipv4.ts";

/** Turns an unknown JSON value found at `path` into a `T`, or throws a CniError. */
export type Parser<T> = (value: unknown, path: string) => T;

/** The value type a parser produces. */
export type Parsed<P> = P extends Parser<infer T> ? T : never;

/** Joins a parent path and a key the way messages show them. */
export function joinPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return path === "" ? key : `${path}.${key}`;
}

/** An invalid-config error for `path`. */
export function invalid(path: string, what: string): CniError {
  return new CniError(ErrorCode.INVALID_CONFIG, `invalid network configuration: ${path} ${what}`);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  return `${typeof value} ${JSON.stringify(value)}`;
}

/** A string, optionally non-empty or matching a pattern. */
export function str(opts: { nonEmpty?: boolean; pattern?: RegExp; hint?: string } = {}): Parser<
  string
> {
  return (v, path) => {
    if (typeof v !== "string") throw invalid(path, `must be a string, got ${describe(v)}`);
    if (opts.nonEmpty && v === "") throw invalid(path, "must not be empty");
    if (opts.pattern && !opts.pattern.test(v)) {
      throw invalid(path, `${JSON.stringify(v)} is not ${opts.hint ?? `like ${opts.pattern}`}`);
    }
    return v;
  };
}

/** A number, optionally an integer within bounds. */
export function num(opts: { int?: boolean; min?: number; max?: number } = {}): Parser<number> {
  return (v, path) => {
    if (typeof v !== "number" || !Number.isFinite(v)) {
      throw invalid(path, `must be a number, got ${describe(v)}`);
    }
    if (opts.int && !Number.isInteger(v)) throw invalid(path, `must be an integer, got ${v}`);
    if (opts.min !== undefined && v < opts.min) {
      throw invalid(path, `must be ≥ ${opts.min}, got ${v}`);
    }
    if (opts.max !== undefined && v > opts.max) {
      throw invalid(path, `must be ≤ ${opts.max}, got ${v}`);
    }
    return v;
  };
}

/** A boolean. */
export const bool: Parser<boolean> = (v, path) => {
  if (typeof v !== "boolean") throw invalid(path, `must be true or false, got ${describe(v)}`);
  return v;
};

/** One of a fixed set of strings. */
export function oneOf<T extends string>(values: readonly T[]): Parser<T> {
  return (v, path) => {
    if (typeof v !== "string" || !(values as readonly string[]).includes(v)) {
      throw invalid(
        path,
        `must be one of ${values.map((x) => `"${x}"`).join(", ")}, got ${describe(v)}`,
      );
    }
    return v as T;
  };
}

/** An array whose every item parses with `item`. */
export function arr<T>(item: Parser<T>): Parser<T[]> {
  return (v, path) => {
    if (!Array.isArray(v)) throw invalid(path, `must be an array, got ${describe(v)}`);
    return v.map((x, i) => item(x, joinPath(path, i)));
  };
}

/** A JSON object (not null, not an array), returned as a plain record. */
export function plainObject(v: unknown, path: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw invalid(path, `must be an object, got ${describe(v)}`);
  }
  return v as Record<string, unknown>;
}

/** An object with arbitrary keys, each value parsed with `value`. */
export function record<T>(value: Parser<T>): Parser<Record<string, T>> {
  return (v, path) => {
    const o = plainObject(v, path);
    // fromEntries defines own properties: a key named "__proto__" stays a key.
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, value(x, joinPath(path, k))]));
  };
}

/** Makes a field optional: `undefined` (absent) or `null` pass through as `undefined`. */
export function optional<T>(p: Parser<T>): Parser<T | undefined> {
  return (v, path) => (v === undefined || v === null ? undefined : p(v, path));
}

/** Makes a field optional with a default value. */
export function withDefault<T>(p: Parser<T>, fallback: T): Parser<T> {
  return (v, path) => (v === undefined || v === null ? fallback : p(v, path));
}

/** Accepts any JSON value as is (for fields passed through untouched). */
export const anyValue: Parser<unknown> = (v) => v;

/** What an object parser does with keys its shape does not name. */
export type UnknownKeys = "reject" | "ignore";

type Shape = Record<string, Parser<unknown>>;
type ShapeResult<S extends Shape> = { [K in keyof S]: Parsed<S[K]> };

/**
 * An object with known fields. Unknown keys are ignored, or rejected with code 2 naming
 * the key and its value (the spec asks unsupported-field errors to name both).
 */
export function obj<S extends Shape>(
  shape: S,
  opts: { unknown?: UnknownKeys } = {},
): Parser<ShapeResult<S>> {
  return (v, path) => {
    const o = plainObject(v, path);
    if (opts.unknown === "reject") {
      for (const k of Object.keys(o)) {
        // Own keys only: `in` would take "constructor" or "__proto__" for a known field.
        if (!Object.hasOwn(shape, k)) {
          throw new CniError(
            ErrorCode.UNSUPPORTED_FIELD,
            `unsupported field ${joinPath(path, k)}=${JSON.stringify(o[k])}`,
            "remove the field, or check its spelling against the README's configuration table",
          );
        }
      }
    }
    const out: Record<string, unknown> = {};
    for (const [k, p] of Object.entries(shape)) {
      const value = p(Object.hasOwn(o, k) ? o[k] : undefined, joinPath(path, k));
      // An optional field left out stays left out (no key holding undefined).
      if (value !== undefined) out[k] = value;
    }
    return out as ShapeResult<S>;
  };
}

/** True for an IPv6 address (a loose check: hex groups and colons, optional dotted tail). */
export function isIpv6(s: string): boolean {
  return s.includes(":") && /^[0-9a-fA-F:.]+$/.test(s) && (s.match(/::/g) ?? []).length <= 1;
}

/** An IPv4 address. */
export const ipv4: Parser<string> = (v, path) => {
  const s = str()(v, path);
  if (!isIpv4(s)) throw invalid(path, `${JSON.stringify(s)} is not an IPv4 address`);
  return s;
};

/** An IPv4 or IPv6 address. */
export const ipAddress: Parser<string> = (v, path) => {
  const s = str()(v, path);
  if (!isIpv4(s) && !isIpv6(s)) throw invalid(path, `${JSON.stringify(s)} is not an IP address`);
  return s;
};

/** An IPv4 or IPv6 CIDR ("10.0.0.0/16", "fd00::/64"). */
export const cidr: Parser<string> = (v, path) => {
  const s = str()(v, path);
  const slash = s.indexOf("/");
  const ip = s.slice(0, slash);
  const len = Number(s.slice(slash + 1));
  const max = isIpv4(ip) ? 32 : isIpv6(ip) ? 128 : -1;
  if (slash < 0 || max < 0 || !/^\d{1,3}$/.test(s.slice(slash + 1)) || len > max) {
    throw invalid(path, `${JSON.stringify(s)} is not a CIDR like "10.0.1.0/24"`);
  }
  return s;
};

/** An IPv4 CIDR. */
export const ipv4Cidr: Parser<string> = (v, path) => {
  const s = cidr(v, path);
  if (!isIpv4(s.slice(0, s.indexOf("/")))) throw invalid(path, `${JSON.stringify(s)} is not IPv4`);
  return s;
};
