/**
 * Deterministic names and table numbers. Host-side link names are derived from
 * (containerId, ifName) alone, so DEL finds them again without any stored state, and two
 * attachments never share one.
 *
 * @module
 */
import { DatapathInputError } from "./errors.ts";
import { sha1Hex } from "./sha1.ts";
import { ENI_TABLE_BASE, type EniInfo, MAIN_TABLE_ID } from "./types.ts";

/** Hex characters of the hash in a host link name: 44 bits, collision-free in practice. */
export const NAME_HASH_CHARS = 11;

/** Longest interface name the kernel accepts, in bytes. */
export const MAX_IFNAME_BYTES = 15;

/**
 * The hash input. The separator cannot occur in a CNI container id (alphanumerics, `_`,
 * `.`, `-`) nor in an interface name, so ("ab", "c") and ("a", "bc") differ.
 */
function attachmentHash(containerId: string, ifName: string): string {
  return sha1Hex(`${containerId}/${ifName}`);
}

/**
 * Host-side link name of an attachment: `prefix` + 11 hex chars of SHA-1 of
 * `containerId/ifName`, e.g. "vpc3f2a9c01d4e". The prefix is 1–4 lower-case letters or
 * digits so the name fits the kernel's 15 bytes.
 */
export function hostVethName(prefix: string, containerId: string, ifName: string): string {
  if (!/^[a-z0-9]{1,4}$/.test(prefix)) {
    throw new DatapathInputError(
      `hostVethPrefix ${JSON.stringify(prefix)} must be 1-4 lower-case letters or digits ` +
        `(the name is the prefix plus ${NAME_HASH_CHARS} hex characters, at most ${MAX_IFNAME_BYTES} bytes)`,
    );
  }
  return prefix + attachmentHash(containerId, ifName).slice(0, NAME_HASH_CHARS);
}

/**
 * The name the pod-side link has inside the pod netns before it is renamed to the CNI
 * ifName: a clash with an existing ifName then fails at the rename, after which the
 * half-made link is removed.
 */
export function podTempName(containerId: string, ifName: string): string {
  return "tmp" + attachmentHash(containerId, ifName).slice(0, NAME_HASH_CHARS);
}

/**
 * The route table T(E) of an ENI: main for the primary ENI, otherwise the daemon's
 * `routeTable`, or 100 + device index when that is not set.
 */
export function eniTable(eni: EniInfo | undefined): number {
  if (!eni || eni.primary || eni.deviceIndex === 0) return MAIN_TABLE_ID;
  if (Number.isInteger(eni.routeTable) && eni.routeTable > 0) return eni.routeTable;
  return ENI_TABLE_BASE + eni.deviceIndex;
}
