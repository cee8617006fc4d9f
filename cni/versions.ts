/**
 * CNI spec versions: which ones vpcni speaks, how they compare, and which features each
 * one has (result shapes, CHECK, GC and STATUS).
 *
 * @module
 */
import { SUPPORTED_CNI_VERSIONS } from "../base/version.ts";
import { CniError, ErrorCode } from "./errors.ts";

export { SUPPORTED_CNI_VERSIONS };

/** The newest version vpcni speaks: used when a request names none. */
export const LATEST_CNI_VERSION = "1.1.0";

const SEMVER_RE = /^(\d+)\.(\d+)\.(\d+)$/;

/** Compares two `x.y.z` versions: negative, zero or positive like a sort comparator. */
export function compareVersions(a: string, b: string): number {
  const pa = SEMVER_RE.exec(a);
  const pb = SEMVER_RE.exec(b);
  if (!pa || !pb) throw new Error(`not a version: ${pa ? b : a}`);
  for (let i = 1; i <= 3; i++) {
    const d = Number(pa[i]) - Number(pb[i]);
    if (d !== 0) return d;
  }
  return 0;
}

/** True when `v` looks like `x.y.z`. */
export function isVersionString(v: string): boolean {
  return SEMVER_RE.test(v);
}

/** True when vpcni speaks `v`. */
export function isSupportedVersion(v: string): boolean {
  return SUPPORTED_CNI_VERSIONS.includes(v);
}

/** Throws code 1 unless vpcni speaks `v`; `what` says where the version came from. */
export function requireSupportedVersion(v: string, what: string): string {
  if (!isSupportedVersion(v)) {
    throw new CniError(
      ErrorCode.INCOMPATIBLE_VERSION,
      `incompatible CNI version ${JSON.stringify(v)} in ${what}`,
      `vpcni speaks ${SUPPORTED_CNI_VERSIONS.join(", ")}`,
    );
  }
  return v;
}

/** True when results of version `v` carry `ips[].version` (0.3.x and 0.4.0). */
export function hasIpVersionField(v: string): boolean {
  return compareVersions(v, "1.0.0") < 0;
}

/** True when version `v` has the 1.1 fields (interface mtu/socketPath/pciID, route extras). */
export function hasV11Fields(v: string): boolean {
  return compareVersions(v, "1.1.0") >= 0;
}

/** True when version `v` has the GC and STATUS verbs. */
export function hasGcAndStatus(v: string): boolean {
  return compareVersions(v, "1.1.0") >= 0;
}

/** True when version `v` has the CHECK verb. */
export function hasCheck(v: string): boolean {
  return compareVersions(v, "0.4.0") >= 0;
}
