/**
 * Version facts shared by `vpcni version`, the CNI VERSION verb and the daemon.
 * Kept free of npm imports: the CNI plugin reads it on its hot path.
 *
 * @module
 */

/** The vpcni release, kept in step with deno.json's `version`. */
export const VPCNI_VERSION = "0.1.0";

/** CNI spec versions the plugin speaks, oldest first. */
export const SUPPORTED_CNI_VERSIONS: readonly string[] = [
  "0.3.0",
  "0.3.1",
  "0.4.0",
  "1.0.0",
  "1.1.0",
];

/** What `vpcni version --json` prints. */
export interface VersionInfo {
  version: string;
  deno: string;
  v8: string;
  typescript: string;
  cniVersions: readonly string[];
}

/** Collects the version facts of this build and runtime. */
export function versionInfo(): VersionInfo {
  return {
    version: VPCNI_VERSION,
    deno: Deno.version.deno,
    v8: Deno.version.v8,
    typescript: Deno.version.typescript,
    cniVersions: SUPPORTED_CNI_VERSIONS,
  };
}
