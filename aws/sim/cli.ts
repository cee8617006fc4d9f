/**
 * `vpcni sim`: run the EC2 + IMDS simulator on loopback until Ctrl-C.
 *
 * @module
 */
import type { Command } from "commander";
import { ScenarioError } from "./scenario.ts";
import { startSim } from "./mod.ts";

interface SimFlags {
  scenario?: string;
  port?: string;
  json?: boolean;
  log?: string | boolean;
}

function isFileError(e: unknown): boolean {
  return e instanceof Deno.errors.NotFound || e instanceof Deno.errors.PermissionDenied ||
    e instanceof Deno.errors.IsADirectory || e instanceof Deno.errors.NotADirectory;
}

/** A file error in words (the OS message repeats the path and the syscall). */
function fileProblem(e: unknown): string {
  if (e instanceof Deno.errors.NotFound) return "no such file or directory";
  if (e instanceof Deno.errors.PermissionDenied) return "permission denied";
  if (e instanceof Deno.errors.IsADirectory) return "it is a directory";
  if (e instanceof Deno.errors.NotADirectory) return "a part of the path is not a directory";
  return (e as Error).message;
}

/** Why `path` cannot be read as a file, or undefined when it can. */
function unreadable(path: string): string | undefined {
  try {
    if (Deno.statSync(path).isDirectory) return "it is a directory";
    Deno.openSync(path, { read: true }).close();
    return undefined;
  } catch (e) {
    return fileProblem(e);
  }
}

/** Adds the `sim` verb to the program. */
export function registerSim(program: Command): void {
  program.command("sim")
    .description("run the EC2 + IMDS simulator on loopback until Ctrl-C")
    .requiredOption(
      "--scenario <file>",
      "required: scenario file (YAML or JSON), e.g. examples/scenarios/one-node.yaml",
    )
    .option(
      "--port <n>",
      "EC2 port on 127.0.0.1; IMDS of instance k listens on port+k (default: free ports)",
    )
    .option("--json", "print the endpoints as one JSON object")
    .option("--log [file]", "log one line per request to stderr, or append to a file")
    .addHelpText(
      "after",
      `
Examples:
  vpcni sim --scenario examples/scenarios/one-node.yaml --log
  vpcni sim --scenario examples/scenarios/two-node.yaml --port 18000 --json
  curl -s http://127.0.0.1:18000/_sim/state       (the world, as JSON)`,
    )
    .action(async (flags: SimFlags) => {
      let port: number | undefined;
      if (flags.port !== undefined) {
        if (!/^\d+$/.test(flags.port) || Number(flags.port) < 1 || Number(flags.port) > 65000) {
          console.error(`vpcni sim: --port must be a number from 1 to 65000, got '${flags.port}'`);
          Deno.exitCode = 2;
          return;
        }
        port = Number(flags.port);
      }
      const scenarioProblem = unreadable(flags.scenario!);
      if (scenarioProblem) {
        console.error(
          `vpcni sim: --scenario ${flags.scenario}: cannot read: ${scenarioProblem}; ` +
            `pass a scenario file such as examples/scenarios/one-node.yaml`,
        );
        Deno.exitCode = 2;
        return;
      }
      let sim;
      try {
        sim = await startSim({ scenario: flags.scenario!, port, log: flags.log });
      } catch (e) {
        if (e instanceof ScenarioError) {
          console.error(`vpcni sim: ${e.message}\nFix the scenario file named by --scenario.`);
          Deno.exitCode = 2;
          return;
        }
        if (typeof flags.log === "string" && isFileError(e)) {
          console.error(
            `vpcni sim: --log ${flags.log}: cannot open for appending: ${fileProblem(e)}; ` +
              `name a writable file, or give --log alone to log to stderr`,
          );
          Deno.exitCode = 2;
          return;
        }
        if (e instanceof Deno.errors.AddrInUse) {
          console.error(`vpcni sim: port ${port} (or one after it) is in use; pick another --port`);
          Deno.exitCode = 1;
          return;
        }
        throw e;
      }
      const imds = Object.fromEntries(
        [...sim.state.instances.keys()].map((id) => [id, sim.imdsEndpointFor(id)]),
      );
      if (flags.json) {
        console.log(
          JSON.stringify({ region: sim.state.region, ec2Endpoint: sim.ec2Endpoint, imds }),
        );
      } else {
        console.log(
          `EC2   ${sim.ec2Endpoint}   (region ${sim.state.region}, any static credentials)`,
        );
        for (const [id, url] of Object.entries(imds)) console.log(`IMDS  ${url}   ${id}`);
        console.log(`CTRL  ${sim.ec2Endpoint}/_sim/{state,stats,faults}   (PATCH faults as JSON)`);
        console.log("Press Ctrl-C to stop.");
      }
      await new Promise<void>((resolve) => {
        const stop = () => {
          Deno.removeSignalListener("SIGINT", stop);
          Deno.removeSignalListener("SIGTERM", stop);
          resolve();
        };
        Deno.addSignalListener("SIGINT", stop);
        Deno.addSignalListener("SIGTERM", stop);
      });
      await sim.close();
    });
}
