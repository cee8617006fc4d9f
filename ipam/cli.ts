/**
 * `vpcni serve`: run the IPAM daemon.
 *
 * @module
 */
import type { Command } from "commander";

/** Adds the `serve` verb to the program. */
export function registerServe(program: Command): void {
  program.command("serve")
    .description("run the IPAM daemon")
    .action(() => {
      throw new Error("vpcni serve is not built yet");
    });
}
