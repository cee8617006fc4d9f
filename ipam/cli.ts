/**
 * `vpcni serve`: run the IPAM daemon. Configuration comes from `--config` (YAML or JSON),
 * then environment variables, then these flags; `--check-config` validates and prints the
 * effective configuration without starting.
 *
 * @module
 */
import type { Command } from "commander";
import { ConfigError, type ConfigOverrides, type DaemonConfig, loadConfig } from "./config.ts";
import { KNOBS } from "./knobs.ts";
import { log, setupLogging } from "./log.ts";

/** `description (env NAME) (default: value)` for a flag that sets a documented knob. */
function knobHelp(knob: string, description: string, shownDefault?: string): string {
  const k = KNOBS.find((x) => x.knob === knob);
  if (!k) throw new Error(`no knob ${knob}`);
  const env = k.env ? ` (env ${k.env})` : "";
  const def = shownDefault ?? (k.def.startsWith("(") ? k.def.slice(1, -1) : k.def);
  return `${description}${env} (default: ${def})`;
}

/** An IMDS failure at start, told as the knob that points at IMDS and what to check. */
function imdsUnreachable(cfg: DaemonConfig, e: Error): Error {
  const where = cfg.imdsEndpoint
    ? `imdsEndpoint ${cfg.imdsEndpoint}`
    : "imdsEndpoint (default http://169.254.169.254)";
  return new Error(
    `${where}: instance metadata did not answer (${e.message}). The daemon learns the node ` +
      `(instance, ENIs, subnet) there and does not start without it. On EC2: enable IMDSv2 ` +
      `and set the hop limit to 2 for containers (aws ec2 modify-instance-metadata-options ` +
      `--http-endpoint enabled --http-put-response-hop-limit 2); elsewhere set imdsEndpoint ` +
      `(--imds-endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT)`,
    { cause: e },
  );
}

interface ServeFlags extends ConfigOverrides {
  config?: string;
  checkConfig?: boolean;
  listKnobs?: boolean;
  socket?: string;
}

/** Adds the `serve` verb to the program. */
export function registerServe(program: Command): void {
  program.command("serve")
    .description("run the IPAM daemon (unix socket API for the plugin, loopback introspection)")
    .option("--config <file>", "daemon configuration file (YAML or JSON)")
    .option(
      "--cluster-name <name>",
      knobHelp("clusterName", "cluster name tagged on created ENIs"),
    )
    .option("--datapath <name>", knobHelp("datapath", "ipvlan-l2 | ipvlan-l3s | veth"))
    .option("--socket <path>", knobHelp("socketPath", "unix socket for the CNI plugin"))
    .option("--state-dir <dir>", knobHelp("stateDir", "checkpoint directory"))
    .option("--listen <host:port>", knobHelp("listen", "loopback introspection/metrics address"))
    .option("--region <region>", knobHelp("region", "EC2 region"))
    .option(
      "--ec2-endpoint <url>",
      knobHelp("ec2Endpoint", "EC2 endpoint override", "the region's public endpoint"),
    )
    .option("--imds-endpoint <url>", knobHelp("imdsEndpoint", "IMDS endpoint"))
    .option("--log-level <level>", knobHelp("logLevel", "debug | info | warning | error"))
    .option("--check-config", "validate the configuration, print it as JSON and exit")
    .option("--list-knobs", "print every knob with its default and exit")
    .action(async (flags: ServeFlags) => {
      if (flags.listKnobs) {
        for (const k of KNOBS) console.log(`${k.knob}\t${k.def}\t${k.doc}`);
        return;
      }
      const overrides: ConfigOverrides = {
        clusterName: flags.clusterName,
        datapath: flags.datapath,
        socketPath: flags.socket,
        stateDir: flags.stateDir,
        listen: flags.listen,
        region: flags.region,
        ec2Endpoint: flags.ec2Endpoint,
        imdsEndpoint: flags.imdsEndpoint,
        logLevel: flags.logLevel,
      };
      let cfg;
      try {
        cfg = await loadConfig(flags.config, Deno.env.toObject(), overrides);
      } catch (e) {
        if (e instanceof ConfigError) {
          console.error(
            e.knobs
              ? `vpcni serve: ${e.message}\nThe daemon did not start; fix the knobs above.`
              : `vpcni serve: ${e.message}`,
          );
          Deno.exitCode = 2;
          return;
        }
        throw e;
      }
      if (flags.checkConfig) {
        console.log(JSON.stringify(cfg, null, 2));
        return;
      }
      await setupLogging(cfg.logLevel);
      // Loaded only when serving: the AWS SDK stays out of every other verb.
      const { createAwsCloud } = await import("./aws_cloud.ts");
      const { startDaemon } = await import("./daemon.ts");
      const { EXIT_STATE_DIR_BUSY, StateDirBusyError } = await import("./state_dir.ts");
      let daemon;
      try {
        // The state dir is claimed (or another daemon on it refused) before IMDS is asked.
        daemon = await startDaemon(cfg, () =>
          createAwsCloud({
            ec2Endpoint: cfg.ec2Endpoint,
            imdsEndpoint: cfg.imdsEndpoint,
            region: cfg.region,
          }).catch((e) => {
            throw e instanceof Error && e.name === "ImdsError" ? imdsUnreachable(cfg, e) : e;
          }));
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        log.error("daemon refused to start: {error}", { error: msg });
        console.error(`vpcni serve: ${msg}`);
        Deno.exitCode = e instanceof ConfigError
          ? 2
          : e instanceof StateDirBusyError
          ? EXIT_STATE_DIR_BUSY
          : 1;
        return;
      }
      const stop = () => {
        log.info("stopping on signal");
        void daemon.stop();
      };
      Deno.addSignalListener("SIGTERM", stop);
      Deno.addSignalListener("SIGINT", stop);
      await daemon.finished;
      Deno.removeSignalListener("SIGTERM", stop);
      Deno.removeSignalListener("SIGINT", stop);
    });
}
