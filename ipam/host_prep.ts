/**
 * The host side of the node's ENIs, set up by the daemon: each ENI's link up (its MTU left
 * alone), the sysctls its pods need (proxy ARP for veth and ipvlan-l3s), its own primary
 * address and its route table T(E) — once, when the ENI is attached, and at start for those
 * attached already. The work runs on the CNI service's worker (ipam/cni_service.ts), the
 * thread that enters netns and makes netlink calls; the daemon's thread only says which ENIs.
 *
 * A pod's ADD then finds its ENI ready: the datapath reads the host side and changes only what
 * differs (nothing, normally), and never waits for a freshly attached ENI's link (up to 5 s,
 * cni/datapath/host.ts) while the daemon has prepared it.
 *
 * @module
 */
import type { CniService } from "./cni_service.ts";
import type { ManagedEni } from "./node_state.ts";
import type { DatapathConfig, DatapathEni } from "../cni/datapath/types.ts";
import { subnetGateway } from "./subnets.ts";
import { log } from "./log.ts";

/** Sets up each ENI's host side once; see the module doc. */
export class HostPreparer {
  #cni: CniService;
  #config: DatapathConfig;
  #routeTableBase: number;
  /** ENIs whose host side is set up, by id (with their MAC: a reused id is a new ENI). */
  #ready = new Map<string, string>();
  #running = false;

  /** Prepares for the `datapath` the daemon serves; route tables from `routeTableBase`. */
  constructor(cni: CniService, datapath: DatapathConfig["kind"], routeTableBase: number) {
    this.#cni = cni;
    this.#routeTableBase = routeTableBase;
    this.#config = {
      kind: datapath,
      mtu: 9001,
      serviceCidrs: [],
      nodeIps: [],
      hostVethPrefix: "vpc",
    };
  }

  /** ENIs prepared so far (ids), for tests and the log. */
  get ready(): string[] {
    return [...this.#ready.keys()];
  }

  /**
   * Sets up every ENI of `enis` not set up yet, one after the other, in the background; an
   * ENI whose link is not on the node yet, or whose setup failed, is tried again at the next
   * call. Calls while a round runs are folded into it.
   */
  sync(enis: Iterable<ManagedEni>): Promise<void> {
    if (this.#running) return Promise.resolve();
    const todo = [...enis].filter((e) => this.#ready.get(e.id) !== e.mac);
    const present = new Set([...enis].map((e) => e.id));
    for (const id of this.#ready.keys()) if (!present.has(id)) this.#ready.delete(id);
    if (todo.length === 0) return Promise.resolve();
    this.#running = true;
    return (async () => {
      try {
        for (const e of todo) {
          try {
            const r = await this.#cni.prepareHost(this.#config, this.#eniInfo(e));
            if (r === "ready") {
              this.#ready.set(e.id, e.mac);
              log.info("host side of {eniId} ready ({mac})", { eniId: e.id, mac: e.mac });
            }
          } catch (err) {
            log.warn("could not set up the host side of {eniId}: {error}", {
              eniId: e.id,
              error: (err as Error).message,
            });
          }
        }
      } finally {
        this.#running = false;
      }
    })();
  }

  #eniInfo(e: ManagedEni): DatapathEni {
    return {
      id: e.id,
      mac: e.mac,
      deviceIndex: e.deviceIndex,
      primary: e.primary,
      subnetId: e.subnetId,
      subnetCidr: e.subnetCidr,
      gateway: subnetGateway(e.subnetCidr),
      routeTable: this.#routeTableBase + e.deviceIndex,
      ...(e.primaryIp ? { primaryIp: e.primaryIp } : {}),
    };
  }
}
