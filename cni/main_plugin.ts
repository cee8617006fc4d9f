/**
 * vpcni as the main plugin (`type: "vpcni"`): reserve an address (daemon or delegated
 * IPAM), wire the pod with the configured datapath, and answer in the request's CNI
 * version. ADD is all-or-nothing; DEL is idempotent; CHECK verifies every object.
 *
 * @module
 */
import * as datapath from "./datapath/mod.ts";
import { DatapathInputError, IfNameTakenError, UnusableAddressError } from "./datapath/errors.ts";
import { type DatapathConfig, type PodAddress, VETH_POD_GATEWAY } from "./datapath/types.ts";
import type { MainPluginConfig } from "./config.ts";
import type { CniEnv } from "./env.ts";
import { CniError, ErrorCode } from "./errors.ts";
import type { PluginLogger } from "./log.ts";
import { type AddressSource, addressSource } from "./address_source.ts";
import { type CniResult, formatResult, mergeDns, mergeResults } from "./result.ts";
import { Rollback } from "./rollback.ts";
import { requireVerbVersion } from "./verb_version.ts";
import { requireValidAttachments } from "./gc_input.ts";
import { pathExists } from "../base/path_exists.ts";
import { delRecordDir, writeDelRecord } from "../proto/del_records.ts";
import { netnsOpenPath } from "../base/netns_alias.ts";

/** What a main-plugin verb needs. */
export interface MainInvocation {
  config: MainPluginConfig;
  env: CniEnv;
  /** The exact stdin bytes, handed unchanged to a delegated IPAM plugin. */
  stdin: Uint8Array;
  log: PluginLogger;
  /** The daemon was found down (cni/thin.ts): DEL goes ahead without it. */
  daemonDown?: boolean;
}

function datapathConfig(
  config: MainPluginConfig,
  nodeIps: string[],
  eniMacs?: string[],
): DatapathConfig {
  return {
    kind: config.datapath,
    mtu: config.mtu,
    serviceCidrs: config.serviceCidrs,
    nodeIps: config.nodeIps.length > 0 ? config.nodeIps : nodeIps,
    hostVethPrefix: config.hostVethPrefix,
    eniMacs,
  };
}

/** The datapath steps, and what each one's failure leaves behind and asks of the user. */
const STEP_ADVICE: Record<"attach" | "detach" | "check", string> = {
  attach: "ADD removed what it had made and released the address; " +
    "'vpcni doctor datapath' shows the node's side; the runtime retries the pod",
  detach: "the reservation is kept so the address is not handed out while objects may " +
    "still point at it; the runtime retries DEL; 'vpcni doctor datapath' lists what is left",
  check: "nothing was changed; 'vpcni doctor datapath' shows the node's side",
};

/**
 * Runs a datapath call for `pod`. An address no pod may have becomes code 105; other input
 * the datapath refuses before touching anything becomes code 7; kernel failures become
 * code 100 naming the step. `details` says what was tried and what to do, never a stack.
 */
async function datapathStep<T>(
  kind: string,
  what: keyof typeof STEP_ADVICE,
  pod: { containerId: string; ifName: string; netns?: string },
  fn: () => T | Promise<T>,
): Promise<T> {
  const tried = `${what} of container ${pod.containerId} interface ${pod.ifName}` +
    (pod.netns ? ` in ${pod.netns}` : "") + ` with the ${kind} datapath`;
  try {
    return await fn();
  } catch (e) {
    if (e instanceof CniError) throw e;
    const err = e as Error;
    if (e instanceof UnusableAddressError) {
      throw new CniError(
        ErrorCode.NO_IPV4_ADDRESS,
        `the IPAM result gives the pod ${err.message}`,
        `tried: ${tried}; nothing was wired and the reservation is released; ` +
          "make the IPAM range hand out only addresses of the pod subnet",
      );
    }
    if (e instanceof IfNameTakenError) {
      throw new CniError(
        ErrorCode.INVALID_ENV,
        `CNI_IFNAME ${JSON.stringify(e.ifName)} already exists in CNI_NETNS ${e.netns}`,
        `tried: ${tried}; nothing was wired and the reservation is released; the existing ` +
          "interface was left alone: pick another CNI_IFNAME, or DEL the attachment that made it",
      );
    }
    if (e instanceof DatapathInputError) {
      throw new CniError(
        ErrorCode.INVALID_CONFIG,
        `invalid network configuration: ${err.message}`,
        `tried: ${tried}; nothing was changed`,
      );
    }
    throw new CniError(
      ErrorCode.DATAPATH_FAILED,
      `${kind} datapath: ${what} failed: ${err.message}`,
      `tried: ${tried}; ${STEP_ADVICE[what]}`,
    );
  }
}

/** ADD: reserve, wire, answer; on any failure undo everything done so far. */
export async function cmdAdd(inv: MainInvocation): Promise<Record<string, unknown>> {
  const { config, env, log } = inv;
  const netns = env.netns!;
  if (!pathExists(netnsOpenPath(netns))) {
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

    const dp = datapathConfig(config, reservation.nodeIps, reservation.nodeEniMacs);
    const pod = {
      containerId: env.containerId!,
      ifName: env.ifName!,
      netns,
      address: reservation.address,
    };
    // attachPod undoes its own partial work when it throws; only a completed attachment
    // is ours to remove (a pre-existing interface of the same name must survive).
    const attached = await datapathStep(
      dp.kind,
      "attach",
      pod,
      () => datapath.attachPod(dp, pod),
    );
    rollback.push("datapath", () => datapath.detachPod(dp, pod));

    const own: CniResult = {
      interfaces: attached.interfaces,
      ips: attached.ips,
      routes: attached.routes,
      dns: mergeDns(config.dns, reservation.dns),
    };
    // In a chain, the earlier plugins' interfaces, addresses, routes and DNS pass through.
    const out = formatResult(mergeResults(config.prevResult, own), config.cniVersion);
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
 *
 * What is removed is what the attachment really holds: the daemon's reservation and the
 * address the kernel routes to the attachment's host link. `prevResult` is only a fallback
 * (a delegated IPAM plugin cannot be asked): it may be stale or name another pod's address,
 * whose rules the datapath keeps while another attachment routes it.
 */
export async function cmdDel(inv: MainInvocation): Promise<void> {
  const { config, env, log } = inv;
  const source = addressSource(config, env, inv.stdin);
  try {
    let held;
    try {
      held = await source.lookup();
    } catch (e) {
      log.warn("could not look up the reservation", { error: (e as Error).message });
    }
    const prev = prevResultAddress(config, env);
    if (held && prev && prev.ip !== held.address.ip) {
      log.warn(
        "prevResult names another address than the attachment holds; removing the held one",
        {
          prevResult: prev.ip,
          held: held.address.ip,
        },
      );
    }
    const address = held?.address ?? prev;
    const netns = env.netns && pathExists(netnsOpenPath(env.netns)) ? env.netns : undefined;
    const dp = datapathConfig(config, [], held?.nodeEniMacs);
    const pod = { containerId: env.containerId!, ifName: env.ifName!, netns, address };
    const skipped = await datapathStep(
      dp.kind,
      "detach",
      pod,
      () => datapath.detachPod(dp, pod),
    );
    for (const s of skipped) log.warn("DEL left a link alone", { why: s });
    try {
      await source.release();
    } catch (e) {
      if (!(inv.daemonDown && e instanceof CniError && e.code === ErrorCode.TRY_AGAIN_LATER)) {
        throw e;
      }
      // The pod's host objects are gone; the reservation is written down for the daemon,
      // which releases it before it serves anything once it is back (proto/del_records.ts).
      await recordDelForDaemon(inv, address?.ip);
    }
    log.info("deleted", { ip: address?.ip });
  } finally {
    source.close();
  }
}

/**
 * Writes down a DEL the daemon could not hear. A record that cannot be written is logged,
 * not fatal: the host objects are gone, and the daemon's sweep releases a reservation whose
 * pod netns and host rule are both gone (ipam/gone_pods.ts).
 */
async function recordDelForDaemon(inv: MainInvocation, ip: string | undefined): Promise<void> {
  const { config, env, log } = inv;
  const socket = config.daemon.socket;
  try {
    const path = await writeDelRecord(socket, {
      version: 1,
      network: config.name,
      containerId: env.containerId!,
      ifName: env.ifName!,
      ...(env.netns ? { netns: env.netns } : {}),
      time: Date.now(),
    });
    log.warn(
      "the daemon is down: DEL removed the host objects and left the release to the " +
        "daemon, which makes it before it serves again",
      { ip, record: path },
    );
  } catch (e) {
    log.warn(
      "the daemon is down: DEL removed the host objects, but could not write its record " +
        `for the daemon in ${delRecordDir(socket)}; the daemon frees the address once the ` +
        "pod netns is gone",
      { ip, error: (e as Error).message },
    );
  }
}

/** CHECK: prevResult must name our interface and address; the kernel and IPAM must agree. */
export async function cmdCheck(inv: MainInvocation): Promise<void> {
  const { config, env } = inv;
  requireVerbVersion("CHECK", config.cniVersion);
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
  if (!pathExists(netnsOpenPath(netns))) {
    throw new CniError(
      ErrorCode.UNKNOWN_CONTAINER,
      `container unknown: CNI_NETNS ${netns} does not exist`,
    );
  }
  const source = addressSource(config, env, inv.stdin);
  try {
    const address = (await source.verify(expected.ip)) ?? expected;
    const dp = datapathConfig(config, []);
    const pod = { containerId: env.containerId!, ifName: env.ifName!, netns, address };
    const problems = await datapathStep(dp.kind, "check", pod, () => datapath.checkPod(dp, pod));
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

/**
 * GC: release the reservations the runtime no longer lists. Each stale attachment's host
 * objects (its DEL never ran, or the runtime lost its cache) go first and its address after,
 * as DEL does; an attachment whose objects could not be removed stays reserved.
 * `cni.dev/valid-attachments` is required: a GC without it is malformed, not "none valid".
 */
export async function cmdGc(inv: MainInvocation): Promise<void> {
  requireVerbVersion("GC", inv.config.cniVersion);
  const valid = requireValidAttachments(inv.config.validAttachments);
  const dp = datapathConfig(inv.config, []);
  const source = addressSource(inv.config, inv.env, inv.stdin);
  let outcome;
  try {
    outcome = await source.gc(valid, async (a) => {
      const pod = { containerId: a.containerId, ifName: a.ifName, address: a.address };
      const podDp = { ...dp, eniMacs: a.nodeEniMacs };
      const skipped = await datapathStep(
        dp.kind,
        "detach",
        pod,
        () => datapath.detachPod(podDp, pod),
      );
      for (const s of skipped) inv.log.warn("GC left a link alone", { why: s });
    });
  } finally {
    source.close();
  }
  for (const r of outcome.released) {
    inv.log.info("gc: removed", { containerId: r.containerId, ip: r.address.ip });
  }
  if (outcome.failed.length) {
    throw new CniError(
      ErrorCode.IO_FAILURE,
      `GC released ${outcome.released.length} reservations and kept ${outcome.failed.length} ` +
        "whose host objects could not be removed",
      `${outcome.failed.join("; ")}; they stay reserved until a later GC removes them`,
    );
  }
}

/** STATUS: is an ADD possible right now? */
export async function cmdStatus(inv: MainInvocation): Promise<void> {
  requireVerbVersion("STATUS", inv.config.cniVersion);
  const source = addressSource(inv.config, inv.env, inv.stdin);
  try {
    await source.status();
  } finally {
    source.close();
  }
}

/** Re-exported for the IPAM role and tests. */
export type { AddressSource };
