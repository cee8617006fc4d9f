/**
 * The verbs a network's `cniVersion` may lack: CHECK came with 0.4.0, GC and STATUS with
 * 1.1.0. Both plugin roles (main and IPAM) refuse such a verb the same way, with code 1.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";
import { hasCheck, hasGcAndStatus } from "./versions.ts";

/** A verb that exists only from some CNI version on. */
export type VersionedVerb = "CHECK" | "GC" | "STATUS";

/** Throws code 1 naming the version `verb` needs unless `cniVersion` has it. */
export function requireVerbVersion(verb: VersionedVerb, cniVersion: string): void {
  const ok = verb === "CHECK" ? hasCheck(cniVersion) : hasGcAndStatus(cniVersion);
  if (!ok) {
    throw new CniError(
      ErrorCode.INCOMPATIBLE_VERSION,
      `incompatible CNI version: ${verb} needs a newer cniVersion than ${cniVersion}`,
      `${verb} exists from cniVersion ${verb === "CHECK" ? "0.4.0" : "1.1.0"}; raise ` +
        `cniVersion in the conflist (vpcni install --cni-version 1.1.0)`,
    );
  }
}
