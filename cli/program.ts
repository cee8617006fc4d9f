/**
 * The operator CLI: builds the commander program and hands each verb to the room
 * that owns it. Each room exports a `register…` function; this file only wires them.
 *
 * @module
 */
import { Command, CommanderError } from "commander";
import { versionInfo } from "./version.ts";
import { registerServe } from "../ipam/cli.ts";
import { registerDoctor } from "../doctor/cli.ts";
import { registerSim } from "../aws/sim/cli.ts";
import { registerInstall } from "./install.ts";
import { registerDemo } from "./demo.ts";

/** Builds the full `vpcni` command tree (exported for tests and `--help` checks). */
export function buildProgram(): Command {
  const program = new Command("vpcni")
    .description(
      "Kubernetes pod networking for AWS VPCs: CNI plugin, IPAM daemon and diagnostics.\n" +
        "Run by the container runtime as a CNI plugin when CNI_COMMAND is set.",
    )
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride();

  program.command("version")
    .description("print the vpcni version, the Deno version and the CNI versions spoken")
    .option("--json", "machine-readable output")
    .action((opts: { json?: boolean }) => {
      const info = versionInfo();
      if (opts.json) {
        console.log(JSON.stringify(info, null, 2));
      } else {
        console.log(
          `vpcni ${info.version} (deno ${info.deno}, v8 ${info.v8}, typescript ${info.typescript})\n` +
            `CNI versions: ${info.cniVersions.join(", ")}`,
        );
      }
    });

  registerServe(program);
  registerDoctor(program);
  registerSim(program);
  registerInstall(program);
  registerDemo(program);
  return program;
}

/** Parses argv and runs the chosen verb; returns the process exit code. */
export async function runCli(args: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(args, { from: "user" });
    // Verbs report failure by setting Deno.exitCode (or by throwing).
    return Deno.exitCode;
  } catch (err) {
    if (err instanceof CommanderError) {
      // commander already printed the message (or the help text).
      return err.exitCode;
    }
    console.error(`vpcni: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}
