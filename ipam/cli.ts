/**
 * `vpcni serve`: run the IPAM daemon. Configuration comes from `--config` (YAML or JSON),
 * then environment variables, then these flags; `--check-config` validates and prints the
 * effective configuration without starting.
 *
 * @module
 */
import type { Command } from "commander";
import { ConfigError, type ConfigOverrides, KNOBS, loadConfig } from "./config.ts";
import { log, setupLogging } from "./log.ts";

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
    .option("--cluster-name <name>", "cluster name tagged on created ENIs (env VPCNI_CLUSTER_NAME)")
    .option("--datapath <name>", "ipvlan-l2 | ipvlan-l3s | veth (env VPCNI_DATAPATH)")
    .option("--socket <path>", "unix socket for the CNI plugin (env VPCNI_SOCKET)")
    .option("--state-dir <dir>", "checkpoint directory (env VPCNI_STATE_DIR)")
    .option("--listen <host:port>", "loopback introspection/metrics address (env VPCNI_LISTEN)")
    .option("--region <region>", "EC2 region (env AWS_REGION; default from IMDS)")
    .option("--ec2-endpoint <url>", "EC2 endpoint override (env VPCNI_EC2_ENDPOINT)")
    .option("--imds-endpoint <url>", "IMDS endpoint (env AWS_EC2_METADATA_SERVICE_ENDPOINT)")
    .option("--log-level <level>", "debug | info | warning | error (env VPCNI_LOG_LEVEL)")
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
            `vpcni serve: ${e.message}\nThe daemon did not start; fix the knobs above.`,
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
      let daemon;
      try {
        const cloud = await createAwsCloud({
          ec2Endpoint: cfg.ec2Endpoint,
          imdsEndpoint: cfg.imdsEndpoint,
          region: cfg.region,
        });
        daemon = await startDaemon(cfg, cloud);
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        log.error("daemon refused to start: {error}", { error: msg });
        console.error(`vpcni serve: ${msg}`);
        Deno.exitCode = e instanceof ConfigError ? 2 : 1;
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
