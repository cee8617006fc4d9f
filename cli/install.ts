/**
 * `vpcni install`: install the binary and conflist into the CNI directories.
 *
 * @module
 */
import type { Command } from "commander";

/** Adds the `install` verb to the program. */
export function registerInstall(program: Command): void {
  program.command("install")
    .description("install the binary and conflist into the CNI directories")
    .action(() => {
      throw new Error("vpcni install is not built yet");
    });
}
