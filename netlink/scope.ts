/**
 * Route/address scopes and address-family arguments, shared by addr, route and neigh.
 *
 * @module
 */

import { InvalidInputError } from "./errors.ts";
import type { Family } from "./ip.ts";

/** A scope by name; "universe" is what iproute2 prints as "global". */
export type ScopeName = "universe" | "site" | "link" | "host" | "nowhere";

const SCOPES: Record<ScopeName, number> = {
  universe: 0,
  site: 200,
  link: 253,
  host: 254,
  nowhere: 255,
};

/** The kernel's number for a scope name; refuses an unknown name. */
export function scopeNumber(name: string): number {
  const n = SCOPES[name as ScopeName];
  if (n === undefined) {
    throw new InvalidInputError(
      `unknown scope ${JSON.stringify(name)}: expected ${Object.keys(SCOPES).join(", ")}`,
    );
  }
  return n;
}

/** The name of a kernel scope number (an unnamed one prints as its number). */
export function scopeName(n: number): ScopeName {
  const found = (Object.keys(SCOPES) as ScopeName[]).find((k) => SCOPES[k] === n);
  return found ?? (String(n) as ScopeName);
}

/** Refuses a family other than 4 or 6. */
export function checkFamily(family: unknown): Family {
  if (family !== 4 && family !== 6) {
    throw new InvalidInputError(`address family must be 4 or 6, got ${String(family)}`);
  }
  return family;
}
