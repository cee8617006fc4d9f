/**
 * `vpcni demo`: run a whole node on the embedded simulator.
 *
 * @module
 */
import type { Command } from "commander";

/** Adds the `demo` verb to the program. */
export function registerDemo(program: Command): void {
  program.command("demo")
    .description("run a whole node on the embedded simulator")
    .action(() => {
      throw new Error("vpcni demo is not built yet");
    });
}
