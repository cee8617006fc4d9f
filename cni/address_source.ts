/**
 * Where the main plugin's pod address comes from: the IPAM daemon (default) or a standard
 * IPAM plugin named in `ipam` (delegation). Both answer the same five questions, so the
 * verbs in cni/main_plugin.ts read the same either way.
 *
 * @module
 */
import type { MainPluginConfig } from "./config.ts";
import type { CniEnv } from "./env.ts";
import { type PodAddress, VETH_POD_GATEWAY } from "./datapath/types.ts";
import { CniError, ErrorCode } from "./errors.ts";
import { IpamClient } from "./ipam_client.ts";
import { execIpamPlugin } from "./delegate.ts";
import { firstIpv4, parseResult, type ResultDns } from "./result.ts";
import type { PodAllocation } from "./ipam_protocol.ts";
import { checkStatus } from "./status.ts";

/** An address reserved for a pod by ADD. */
export interface Reservation {
  address: PodAddress;
  /** Node addresses the daemon reports (ipvlan's pod → node routes). */
  nodeIps: string[];
  /** DNS settings from the IPAM result, if any. */
  dns?: ResultDns;
  /** MACs of the node's ENIs, when the daemon says: links the datapath never touches. */
  nodeEniMacs?: string[];
}

/** An attachment GC found stale: its reservation goes once its host objects are gone. */
export interface ReleasedAttachment {
  containerId: string;
  ifName: string;
  address: PodAddress;
  /** MACs of the node's ENIs, when the daemon says. */
  nodeEniMacs?: string[];
}

/** What GC did: the attachments released, and those kept because cleanup failed. */
export interface GcOutcome {
  released: ReleasedAttachment[];
  /** One line per attachment whose host objects could not be removed (still reserved). */
  failed: string[];
}

/** The IPAM side of the main plugin. */
export interface AddressSource {
  /** ADD: reserve an address. */
  reserve(): Promise<Reservation>;
  /** Undo or DEL: release this attachment's reservation; unknown attachments are fine. */
  release(): Promise<void>;
  /** DEL: what is reserved for this attachment, if the source can tell. */
  lookup(): Promise<Reservation | undefined>;
  /**
   * CHECK: throws when the reservation is gone or differs from `expectedIp`; returns the
   * reserved address when the source knows more than prevResult (the ENI).
   */
  verify(expectedIp: string): Promise<PodAddress | undefined>;
  /**
   * GC: release the reservations of this network not in `valid`. Where the source can tell
   * which they are, `cleanup` removes each one's host objects first and only those whose
   * cleanup succeeded are released (as DEL does: objects first, address after).
   */
  gc(
    valid: { containerId: string; ifName: string }[],
    cleanup: (a: ReleasedAttachment) => Promise<void>,
  ): Promise<GcOutcome>;
  /** STATUS: throws code 50/51 when an ADD cannot be served now. */
  status(): Promise<void>;
  /** Frees sockets. */
  close(): void;
}

/** Turns a daemon allocation into the datapath's address. */
export function allocationAddress(a: PodAllocation): PodAddress {
  return {
    ip: a.ip,
    prefixLen: Number(a.eni.subnetCidr.split("/")[1]),
    gateway: a.eni.gateway,
    eni: a.eni,
  };
}

/** Addresses from the IPAM daemon over its unix socket. */
export class DaemonAddressSource implements AddressSource {
  #client: IpamClient;
  #config: MainPluginConfig;
  #env: CniEnv;

  /** Makes a source for one invocation. */
  constructor(config: MainPluginConfig, env: CniEnv) {
    this.#client = new IpamClient(config.daemon);
    this.#config = config;
    this.#env = env;
  }

  #key() {
    return {
      network: this.#config.name,
      containerId: this.#env.containerId!,
      ifName: this.#env.ifName!,
    };
  }

  async reserve(): Promise<Reservation> {
    const a = this.#env.args;
    const allocation = await this.#client.add({
      op: "add",
      ...this.#key(),
      netns: this.#env.netns!,
      podNamespace: a.podNamespace,
      podName: a.podName,
      podUid: a.podUid,
      annotations: this.#config.annotations,
    });
    return {
      address: allocationAddress(allocation),
      nodeIps: allocation.nodeIps,
      nodeEniMacs: allocation.nodeEniMacs,
    };
  }

  async release(): Promise<void> {
    await this.#client.del({ op: "del", ...this.#key() });
  }

  async lookup(): Promise<Reservation | undefined> {
    try {
      const a = await this.#client.check({ op: "check", ...this.#key() });
      return { address: allocationAddress(a), nodeIps: a.nodeIps, nodeEniMacs: a.nodeEniMacs };
    } catch (e) {
      if (e instanceof CniError && e.code === ErrorCode.UNKNOWN_CONTAINER) return undefined;
      throw e;
    }
  }

  async verify(expectedIp: string): Promise<PodAddress | undefined> {
    const allocation = await this.#client.check({ op: "check", ...this.#key() });
    if (allocation.ip !== expectedIp) {
      throw new CniError(
        ErrorCode.RESERVATION_MISMATCH,
        `the daemon reserves ${allocation.ip} for this attachment, but prevResult shows ${expectedIp}`,
      );
    }
    return allocationAddress(allocation);
  }

  async gc(
    valid: { containerId: string; ifName: string }[],
    cleanup: (a: ReleasedAttachment) => Promise<void>,
  ): Promise<GcOutcome> {
    const network = this.#config.name;
    const stale = this.#client.stale({ op: "stale", network, validAttachments: valid });
    const out: GcOutcome = { released: [], failed: [] };
    for (const a of stale) {
      const attachment: ReleasedAttachment = {
        containerId: a.containerId,
        ifName: a.ifName,
        address: allocationAddress(a),
        nodeEniMacs: a.nodeEniMacs,
      };
      try {
        await cleanup(attachment);
      } catch (e) {
        // Its objects may still point at the address: keep it reserved, GC comes again.
        out.failed.push(
          `${a.containerId.slice(0, 12)}/${a.ifName} (${a.ip}): ${(e as Error).message}`,
        );
        continue;
      }
      this.#client.del({ op: "del", network, containerId: a.containerId, ifName: a.ifName });
      out.released.push(attachment);
    }
    return out;
  }

  status(): Promise<void> {
    return checkStatus(this.#client);
  }

  close(): void {
    this.#client.close();
  }
}

/** Addresses from a standard IPAM plugin, run from CNI_PATH with our own stdin. */
export class DelegatedAddressSource implements AddressSource {
  #type: string;
  #stdin: Uint8Array;
  #env: CniEnv;
  #datapath: MainPluginConfig["datapath"];

  /** Makes a source that runs `config.delegateIpam.type`. */
  constructor(config: MainPluginConfig, env: CniEnv, stdin: Uint8Array) {
    this.#type = config.delegateIpam!.type;
    this.#datapath = config.datapath;
    this.#stdin = stdin;
    this.#env = env;
  }

  async reserve(): Promise<Reservation> {
    const raw = await execIpamPlugin(
      this.#type,
      "ADD",
      this.#stdin,
      this.#env.path,
      this.#env.vars,
    );
    let parsed;
    try {
      parsed = parseResult(raw, "ipam result");
    } catch (e) {
      const err = e as CniError;
      throw new CniError(
        ErrorCode.IPAM_PLUGIN_FAILED,
        `IPAM plugin ${this.#type} returned an unusable result`,
        err.message,
      );
    }
    const v4 = firstIpv4(parsed.result);
    if (!v4) {
      throw new CniError(
        ErrorCode.NO_IPV4_ADDRESS,
        `IPAM plugin ${this.#type} returned no IPv4 address`,
        JSON.stringify(raw),
      );
    }
    // veth pods route via a link-local gateway, so only ipvlan needs the subnet's.
    const gateway = v4.gateway ?? (this.#datapath === "veth" ? VETH_POD_GATEWAY : undefined);
    if (gateway === undefined) {
      throw new CniError(
        ErrorCode.INVALID_CONFIG,
        `invalid network configuration: IPAM plugin ${this.#type} returned no gateway, which the ${this.#datapath} datapath needs`,
        "set a gateway in the IPAM plugin's range",
      );
    }
    return {
      address: { ip: v4.ip, prefixLen: v4.prefixLen, gateway },
      nodeIps: [],
      dns: parsed.result.dns,
    };
  }

  async release(): Promise<void> {
    await execIpamPlugin(this.#type, "DEL", this.#stdin, this.#env.path, this.#env.vars);
  }

  lookup(): Promise<Reservation | undefined> {
    // A standard IPAM plugin cannot be asked; DEL reads the kernel and prevResult instead.
    return Promise.resolve(undefined);
  }

  async verify(_expectedIp: string): Promise<PodAddress | undefined> {
    await execIpamPlugin(this.#type, "CHECK", this.#stdin, this.#env.path, this.#env.vars);
    return undefined;
  }

  async gc(): Promise<GcOutcome> {
    // A standard IPAM plugin does not say what it releases; libcni DELs the attachments it
    // has cached before GC, which removes their host objects.
    await execIpamPlugin(this.#type, "GC", this.#stdin, this.#env.path, this.#env.vars);
    return { released: [], failed: [] };
  }

  async status(): Promise<void> {
    await execIpamPlugin(this.#type, "STATUS", this.#stdin, this.#env.path, this.#env.vars);
  }

  close(): void {}
}

/** The source the config asks for. */
export function addressSource(
  config: MainPluginConfig,
  env: CniEnv,
  stdin: Uint8Array,
): AddressSource {
  return config.delegateIpam
    ? new DelegatedAddressSource(config, env, stdin)
    : new DaemonAddressSource(config, env);
}
