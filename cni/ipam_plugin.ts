/**
 * vpcni as an IPAM plugin (`ipam.type: "vpcni"`) under another main plugin such as the
 * reference `ptp` or `ipvlan`: the address comes from the IPAM daemon and is returned as
 * an IPAM result (ips and routes, no interfaces); the main plugin wires the pod.
 *
 * @module
 */
import type { IpamPluginConfig } from "./config.ts";
import type { CniEnv } from "./env.ts";
import { CniError, ErrorCode } from "./errors.ts";
import { IpamClient } from "./ipam_client.ts";
import type { PluginLogger } from "./log.ts";
import { formatResult } from "./result.ts";
import { checkStatus } from "./status.ts";
import { requireValidAttachments } from "./gc_input.ts";
import { requireVerbVersion } from "./verb_version.ts";

/** What an IPAM-role verb needs. */
export interface IpamInvocation {
  config: IpamPluginConfig;
  env: CniEnv;
  log: PluginLogger;
}

function key(inv: IpamInvocation) {
  return { network: inv.config.name, containerId: inv.env.containerId!, ifName: inv.env.ifName! };
}

/** Runs one IPAM-role verb (not VERSION); returns the result object for ADD. */
export async function runIpamVerb(
  inv: IpamInvocation,
): Promise<Record<string, unknown> | undefined> {
  const { config, env } = inv;
  const client = new IpamClient(config.daemon);
  try {
    switch (env.command) {
      case "ADD": {
        const a = await client.add({
          op: "add",
          ...key(inv),
          netns: env.netns!,
          podNamespace: env.args.podNamespace,
          podName: env.args.podName,
          podUid: env.args.podUid,
          annotations: config.annotations,
        });
        const prefixLen = a.eni.subnetCidr.split("/")[1];
        const routes = config.routes ?? [{ dst: "0.0.0.0/0", gw: a.eni.gateway }];
        inv.log.info("reserved", { ip: a.ip });
        return formatResult(
          {
            interfaces: [],
            ips: [{ address: `${a.ip}/${prefixLen}`, gateway: a.eni.gateway }],
            routes,
          },
          config.cniVersion,
          { omitInterfaces: true },
        );
      }
      case "DEL":
        await client.del({ op: "del", ...key(inv) });
        return undefined;
      case "CHECK": {
        requireVerbVersion("CHECK", config.cniVersion);
        const a = await client.check({ op: "check", ...key(inv) });
        const prev = config.prevResult;
        if (prev && !prev.ips.some((ip) => ip.address.split("/")[0] === a.ip)) {
          throw new CniError(
            ErrorCode.RESERVATION_MISMATCH,
            `the daemon reserves ${a.ip} for this attachment, but prevResult does not list it`,
            `prevResult ips: ${prev.ips.map((ip) => ip.address).join(", ") || "none"}`,
          );
        }
        return undefined;
      }
      case "GC":
        requireVerbVersion("GC", config.cniVersion);
        await client.gc({
          op: "gc",
          network: config.name,
          validAttachments: requireValidAttachments(config.validAttachments),
        });
        return undefined;
      case "STATUS":
        requireVerbVersion("STATUS", config.cniVersion);
        await checkStatus(client);
        return undefined;
      default:
        throw new Error(`unexpected command ${env.command}`);
    }
  } finally {
    client.close();
  }
}
