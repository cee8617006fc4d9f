/**
 * The operator CLI: builds the commander program and hands each verb to the room
 * that owns it. Each room exports a `register…` function; this file only wires them.
 *
 * @module
 */
import { Command, CommanderError, type Option } from "commander";
import { versionInfo, VPCNI_VERSION } from "../base/version.ts";
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
    .version(
      VPCNI_VERSION,
      "-V, --version",
      "print the vpcni version alone (details: vpcni version)",
    )
    .showHelpAfterError("(run with --help for usage)")
    .configureHelp({ optionDescription })
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

  program.addHelpText(
    "after",
    `
Examples:
  vpcni doctor                       what is wrong on this node, and the fix
  vpcni doctor maxpods --instance-type m5.large
  vpcni install --dry-run            the conflist install would write
  vpcni demo                         a whole node on the embedded simulator

Run 'vpcni <command> --help' for a command's flags and defaults.`,
  );

  registerServe(program);
  registerDoctor(program);
  registerSim(program);
  registerInstall(program);
  registerDemo(program);
  for (const cmd of allCommands(program)) nameUsageErrors(cmd);
  return program;
}

/** Exit code for a usage error (unknown flag, missing value, bad number). */
export const USAGE_EXIT_CODE = 2;

/**
 * One style for every flag's default, `(default: /opt/cni/bin)`: commander would quote
 * strings and print empty lists; booleans and "no default" show nothing.
 */
function optionDescription(o: Option): string {
  const d: unknown = o.defaultValue;
  const shown = o.defaultValueDescription ??
    (Array.isArray(d) ? (d.length > 0 ? d.join(",") : undefined) : d === undefined ||
        typeof d === "boolean"
      ? undefined
      : String(d));
  return shown === undefined ? o.description : `${o.description} (default: ${shown})`;
}

function allCommands(c: Command): Command[] {
  return [c, ...c.commands.flatMap(allCommands)];
}

/** Usage errors start with the verb (`vpcni doctor maxpods: …`) and name its own --help. */
function nameUsageErrors(cmd: Command): void {
  const path: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) path.unshift(c.name());
  const name = path.join(" ");
  cmd.showHelpAfterError(`(run '${name} --help' for usage)`)
    .configureOutput({ outputError: (s, write) => write(s.replace(/^error: /, `${name}: `)) });
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
      // commander already printed the message (or the help text); a failure here is
      // always a usage error.
      return err.exitCode === 0 ? 0 : USAGE_EXIT_CODE;
    }
    console.error(`vpcni: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}
