/**
 * Running the vpcni CLI from this checkout, as the tests that drive it as a subprocess do.
 *
 * @module
 */
import { MAIN_TS } from "./cni_launcher.ts";

/** `deno` arguments that run main.ts with every permission, unchecked and quiet. */
export const VPCNI_RUN_ARGS: readonly string[] = ["run", "-A", "--no-check", "--quiet", MAIN_TS];

/** The command line of `vpcni <args>` run from this checkout (for `run` or `sh`). */
export function vpcniArgv(...args: string[]): string[] {
  return ["deno", ...VPCNI_RUN_ARGS, ...args];
}
