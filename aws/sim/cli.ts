/**
 * `vpcni sim`: run the EC2 + IMDS simulator on loopback.
 *
 * @module
 */
import type { Command } from "commander";

/** Adds the `sim` verb to the program. */
export function registerSim(program: Command): void {
  program.command("sim")
    .description("run the EC2 + IMDS simulator on loopback")
    .action(() => {
      throw new Error("vpcni sim is not built yet");
    });
}
