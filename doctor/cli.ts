/**
 * `vpcni doctor`: diagnose why pods cannot get addresses.
 *
 * @module
 */
import type { Command } from "commander";

/** Adds the `doctor` verb to the program. */
export function registerDoctor(program: Command): void {
  program.command("doctor")
    .description("diagnose why pods cannot get addresses")
    .action(() => {
      throw new Error("vpcni doctor is not built yet");
    });
}
