/**
 * vpcni as the main plugin (`type: "vpcni"`): reserve an address (daemon or delegated
 * IPAM), wire the pod with the configured datapath, and answer in the request's CNI
 * version. ADD is all-or-nothing; DEL is idempotent; CHECK verifies every object.
 *
 * @module
 */
import * as datapath from "./datapath/mod.ts";
import { DatapathInputError } from "./datapath/errors.ts";
import { type DatapathConfig, type PodAddress, VETH_POD_GATEWAY } from "./datapath/types.ts";
import type { MainPluginConfig } from "./config.ts";
import type { CniEnv } from "./env.ts";
import { CniError, ErrorCode } from "./errors.ts";
import type { PluginLogger } from "./log.ts";
import { type AddressSource, addressSource } from "./address_source.ts";
import { type CniResult, formatResult, mergeDns } from "./result.ts";
import { Rollback } from "./rollback.ts";
import { hasCheck, hasGcAndStatus } from "./versions.ts";

/** What a main-plugin verb needs. */
export interface MainInvocation {
  config: MainPluginConfig;
  env: CniEnv;
  /** The exact stdin bytes, handed unchanged to a delegated IPAM plugin. */
  stdin: Uint8Array;
  log: PluginLogger;
}

/** True when a netns path exists (a missing one means the container is gone). */
export function netnsExists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

function datapathConfig(config: MainPluginConfig, nodeIps: string[]): DatapathConfig {
  return {
    kind: config.datapath,
    mtu: config.mtu,
    serviceCidrs: config.serviceCidrs,
    nodeIps: config.nodeIps.length > 0 ? config.nodeIps : nodeIps,
    hostVethPrefix: config.hostVethPrefix,
  };
}

/**
 * Runs a datapath call. Input the datapath refuses before touching anything becomes code 7;
 * kernel failures become code 100 naming the step.
 */
async function datapathStep<T>(kind: string, what: string, fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof CniError) throw e;
    const err = e as Error;
    if (e instanceof DatapathInputError) {
      throw new CniError(ErrorCode.INVALID_CONFIG, `invalid network configuration: ${err.message}`);
    }
    throw new CniError(
      ErrorCode.DATAPATH_FAILED,
      `${kind} datapath: ${what} failed: ${err.message}`,
      err.stack,
    );
  }
}

function requireVersion(config: MainPluginConfig, verb: string, ok: boolean): void {
  if (!ok) {
    throw new CniError(
      ErrorCode.INCOMPATIBLE_VERSION,
      `incompatible CNI version: ${verb} needs a newer cniVersion than ${config.cniVersion}`,
      `${verb} exists from cniVersion ${verb === "CHECK" ? "0.4.0" : "1.1.0"}; raise ` +
        `cniVersion in the conflist (vpcni install --cni-version 1.1.0)`,
    );
  }
}

/** ADD: reserve, wire, answer; on any failure undo everything done so far. */
export async function cmdAdd(inv: MainInvocation): Promise<Record<string, unknown>> {
  const { config, env, log } = inv;
  const netns = env.netns!;
  if (!netnsExists(netns)) {
    throw new CniError(
      ErrorCode.UNKNOWN_CONTAINER,
      `container unknown: CNI_NETNS ${netns} does not exist`,
    );
  }
  const source = addressSource(config, env, inv.stdin);
  const rollback = new Rollback();
  try {
    const reservation = await source.reserve();
    rollback.push("IP reservation", () => source.release());
    log.debug("reserved", { ip: reservation.address.ip });

    const dp = datapathConfig(config, reservation.nodeIps);
    const pod = {
      containerId: env.containerId!,
      ifName: env.ifName!,
      netns,
      address: reservation.address,
    };
    // attachPod undoes its own partial work when it throws; only a completed attachment
    // is ours to remove (a pre-existing interface of the same name must survive).
    const attached = await datapathStep(dp.kind, "attach", () => datapath.attachPod(dp, pod));
    rollback.push("datapath", () => datapath.detachPod(dp, pod));

    const result: CniResult = {
      interfaces: attached.interfaces,
      ips: attached.ips,
      routes: attached.routes,
      dns: mergeDns(config.dns, reservation.dns),
    };
    const out = formatResult(result, config.cniVersion);
    rollback.commit();
    log.info("added", { ip: reservation.address.ip });
    return out;
  } catch (e) {
    const failures = await rollback.unwind();
    for (const f of failures) log.error("rollback step failed", { failure: f });
    throw e;
  } finally {
    source.close();
  }
}

/**
 * The pod's address as prevResult records it: the IPv4 of the sandbox interface. Without a
 * gateway in the result the veth datapath's own link-local gateway stands in (veth never
 * routes via the subnet gateway); other datapaths then get no address and look it up.
 */
function prevResultAddress(config: MainPluginConfig, env: CniEnv): PodAddress | undefined {
  const prev = config.prevResult;
  if (!prev) return undefined;
  const ifIndex = prev.interfaces.findIndex((i) => i.name === env.ifName && i.sandbox);
  const ip = prev.ips.find((a) =>
    !a.address.includes(":") && (a.interface === undefined || a.interface === ifIndex)
  );
  if (!ip) return undefined;
  const [addr, len] = ip.address.split("/");
  const gateway = ip.gateway ?? (config.datapath === "veth" ? VETH_POD_GATEWAY : undefined);
  return gateway === undefined ? undefined : { ip: addr, prefixLen: Number(len), gateway };
}

/**
 * DEL: tear down whatever exists, then release the reservation. A missing netns, link or
 * reservation is success. A datapath failure keeps the reservation, so the address is
 * never handed out while objects still point at it; the runtime retries DEL.
 */
export async function cmdDel(inv: MainInvocation): Promise<void> {
  const { config, env, log } = inv;
  const source = addressSource(config, env, inv.stdin);
  try {
    // prevResult (libcni's cache) names the pod address; the datapath needs no more to
    // find the pod's rules. Without it, ask the reservation.
    let address = prevResultAddress(config, env);
    if (!address) {
      try {
        address = await source.lookup();
      } catch (e) {
        log.warn("could not look up the reservation", { error: (e as Error).message });
      }
    }
    const netns = env.netns && netnsExists(env.netns) ? env.netns : undefined;
    const dp = datapathConfig(config, []);
    await datapathStep(
      dp.kind,
      "detach",
      () =>
        datapath.detachPod(dp, {
          containerId: env.containerId!,
          ifName: env.ifName!,
          netns,
          address,
        }),
    );
    await source.release();
    log.info("deleted", { ip: address?.ip });
  } finally {
    source.close();
  }
}

/** CHECK: prevResult must name our interface and address; the kernel and IPAM must agree. */
export async function cmdCheck(inv: MainInvocation): Promise<void> {
  const { config, env } = inv;
  requireVersion(config, "CHECK", hasCheck(config.cniVersion));
  if (!config.prevResult) {
    throw new CniError(
      ErrorCode.INVALID_CONFIG,
      "invalid network configuration: prevResult is required for CHECK",
    );
  }
  const netns = env.netns!;
  const sandbox = config.prevResult.interfaces.find((i) => i.name === env.ifName && i.sandbox);
  if (!sandbox) {
    throw new CniError(
      ErrorCode.INVALID_CONFIG,
      `invalid network configuration: prevResult has no interface ${env.ifName} inside a sandbox`,
    );
  }
  if (sandbox.sandbox !== netns) {
    throw new CniError(
      ErrorCode.INVALID_CONFIG,
      `invalid network configuration: prevResult puts ${env.ifName} in ${sandbox.sandbox}, not CNI_NETNS ${netns}`,
    );
  }
  const expected = prevResultAddress(config, env);
  if (!expected) {
    throw new CniError(
      ErrorCode.INVALID_CONFIG,
      `invalid network configuration: prevResult has no IPv4 address on ${env.ifName}`,
    );
  }
  if (!netnsExists(netns)) {
    throw new CniError(
      ErrorCode.UNKNOWN_CONTAINER,
      `container unknown: CNI_NETNS ${netns} does not exist`,
    );
  }
  const source = addressSource(config, env, inv.stdin);
  try {
    const address = (await source.verify(expected.ip)) ?? expected;
    const dp = datapathConfig(config, []);
    const problems = await datapathStep(
      dp.kind,
      "check",
      () =>
        datapath.checkPod(dp, {
          containerId: env.containerId!,
          ifName: env.ifName!,
          netns,
          address,
        }),
    );
    if (problems.length > 0) {
      throw new CniError(
        ErrorCode.CHECK_FAILED,
        `CHECK found ${problems.length} problem(s) with ${env.ifName} in ${netns}: ${problems[0]}`,
        problems.join("; "),
      );
    }
  } finally {
    source.close();
  }
}

/** GC: release reservations the runtime no longer lists. */
export async function cmdGc(inv: MainInvocation): Promise<void> {
  requireVersion(inv.config, "GC", hasGcAndStatus(inv.config.cniVersion));
  const source = addressSource(inv.config, inv.env, inv.stdin);
  let released;
  try {
    released = await source.gc();
  } finally {
    source.close();
  }
  // An attachment the runtime no longer lists may still have its host veth and rules (its
  // DEL never ran, or the runtime lost its cache): remove them with the reservation.
  const dp = datapathConfig(inv.config, []);
  const failed: string[] = [];
  for (const r of released) {
    try {
      await datapathStep(dp.kind, "detach", () => datapath.detachPod(dp, r));
      inv.log.info("gc: removed", { containerId: r.containerId, ip: r.address.ip });
    } catch (e) {
      failed.push(
        `${r.containerId.slice(0, 12)}/${r.ifName} (${r.address.ip}): ${(e as Error).message}`,
      );
    }
  }
  if (failed.length) {
    throw new CniError(
      ErrorCode.IO_FAILURE,
      `GC released ${released.length} reservations but could not remove the host objects of ${failed.length}`,
      failed.join("; "),
    );
  }
}

/** STATUS: is an ADD possible right now? */
export async function cmdStatus(inv: MainInvocation): Promise<void> {
  requireVersion(inv.config, "STATUS", hasGcAndStatus(inv.config.cniVersion));
  const source = addressSource(inv.config, inv.env, inv.stdin);
  try {
    await source.status();
  } finally {
    source.close();
  }
}

/** Re-exported for the IPAM role and tests. */
export type { AddressSource };
