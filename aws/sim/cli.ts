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

/** Adds the `sim` verb to the program. */
export function registerSim(program: Command): void {
  program.command("sim")
    .description("run the EC2 + IMDS simulator on loopback until Ctrl-C")
    .requiredOption(
      "--scenario <file>",
      "scenario file (YAML or JSON), e.g. examples/scenarios/one-node.yaml",
    )
    .option(
      "--port <n>",
      "EC2 port on 127.0.0.1; IMDS of instance k listens on port+k (default: free ports)",
    )
    .option("--json", "print the endpoints as one JSON object")
    .option("--log [file]", "log one line per request to stderr, or append to a file")
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
      let sim;
      try {
        sim = await startSim({ scenario: flags.scenario!, port, log: flags.log });
      } catch (e) {
        if (e instanceof ScenarioError) {
          console.error(`vpcni sim: ${e.message}\nFix the scenario file named by --scenario.`);
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
