/**
 * A minimal VPC fabric for datapath tests: one netns standing for the VPC, a veth per ENI
 * between it and a node netns, a /32 route and a permanent neighbour per owned IP (the VPC
 * knows which ENI owns each address and never ARPs for it), every subnet gateway answered
 * from the fabric's loopback, proxy ARP for in-subnet neighbours, and nftables netdev
 * ingress chains dropping frames whose source MAC or IPv4 address the ENI does not own.
 * Tests may use ip/nft; the product may not.
 *
 * @module
 */
import { sh } from "./sh.ts";
import { createNetns, deleteNetns, type TestNetns, uniqueName } from "./netns.ts";

/** One ENI attached to a node through the fabric. */
export interface FabricEni {
  node: TestNetns;
  /** Link name in the node netns: `eth<deviceIndex>`. */
  name: string;
  /** Link name on the fabric side. */
  fabricSide: string;
  mac: string;
  deviceIndex: number;
  subnetCidr: string;
  gateway: string;
  /** IPv4 addresses this ENI owns (the fabric routes them to it and accepts them from it). */
  ips: string[];
}

/** Options of {@linkcode DatapathFabric.attachEni}. */
export interface AttachEniOptions {
  deviceIndex: number;
  mac: string;
  subnetCidr: string;
  gateway: string;
  /** For the primary ENI (device 0): the node address, configured with the subnet prefix. */
  primaryIp?: string;
  /** Further addresses the ENI owns (pod IPs). */
  ips?: string[];
}

const TABLE = "vdpfabric";

/** The fabric netns and the ENIs attached through it. */
export class DatapathFabric {
  readonly enis: FabricEni[] = [];
  private counter = 0;

  private constructor(readonly ns: TestNetns) {}

  /** Creates the fabric netns (forwarding on, reverse-path filtering off). */
  static async create(prefix = "vdp"): Promise<DatapathFabric> {
    const ns = await createNetns(uniqueName(`${prefix}f`));
    const f = new DatapathFabric(ns);
    try {
      for (
        const kv of [
          "net.ipv4.ip_forward=1",
          "net.ipv4.conf.all.rp_filter=0",
          "net.ipv4.conf.default.rp_filter=0",
          "net.ipv4.conf.default.proxy_arp=1",
        ]
      ) await sh(["sysctl", "-qw", kv], { netns: ns.name });
      await f.nft(`add table netdev ${TABLE}`);
    } catch (e) {
      await deleteNetns(ns.name);
      throw e;
    }
    return f;
  }

  private nft(script: string): Promise<string> {
    return sh(["nft", "-f", "-"], { netns: this.ns.name, stdin: script + "\n" });
  }

  /**
   * Attaches an ENI to `node`: link `eth<deviceIndex>` with the ENI's MAC. The primary ENI
   * gets its address and the node's default route; a secondary stays down without an
   * address, as on a fresh instance.
   */
  async attachEni(node: TestNetns, o: AttachEniOptions): Promise<FabricEni> {
    const name = `eth${o.deviceIndex}`;
    const fabricSide = `fe${++this.counter}`;
    const fab = this.ns.name;
    // A VPC carries 9001-byte frames; both ends start there, as on an EC2 instance.
    const add = `ip link add ${fabricSide} netns ${fab} mtu 9001 type veth peer name ${name}` +
      ` netns ${node.name} address ${o.mac} mtu 9001`;
    await sh(add.split(" "));
    // The VPC answers ARP for in-subnet addresses at once; proxy ARP would wait up to 0.8 s.
    await sh(["sysctl", "-qw", `net.ipv4.neigh.${fabricSide}.proxy_delay=0`], { netns: fab });
    await sh(["ip", "link", "set", fabricSide, "up"], { netns: fab });
    // Every subnet's router address answers from the fabric itself.
    await sh(["ip", "addr", "replace", `${o.gateway}/32`, "dev", "lo"], { netns: fab });
    const eni: FabricEni = {
      node,
      name,
      fabricSide,
      mac: o.mac,
      deviceIndex: o.deviceIndex,
      subnetCidr: o.subnetCidr,
      gateway: o.gateway,
      ips: [],
    };
    this.enis.push(eni);
    await this.nft([
      `add set netdev ${TABLE} own_${fabricSide} { type ipv4_addr; }`,
      `add chain netdev ${TABLE} in_${fabricSide} { type filter hook ingress device "${fabricSide}" priority 0; policy accept; }`,
      `add rule netdev ${TABLE} in_${fabricSide} ether saddr != ${o.mac} counter drop`,
      `add rule netdev ${TABLE} in_${fabricSide} meta protocol ip ip saddr != @own_${fabricSide} counter drop`,
    ].join("\n"));
    if (o.primaryIp) {
      const len = o.subnetCidr.split("/")[1];
      await sh(["ip", "addr", "add", `${o.primaryIp}/${len}`, "dev", name], { netns: node.name });
      await sh(["ip", "link", "set", name, "up"], { netns: node.name });
      await sh(["ip", "route", "replace", "default", "via", o.gateway, "dev", name], {
        netns: node.name,
      });
      await this.assignIp(eni, o.primaryIp);
    }
    for (const ip of o.ips ?? []) await this.assignIp(eni, ip);
    return eni;
  }

  /** Makes `ip` owned by `eni`: routed to it, and accepted as a source from it. */
  async assignIp(eni: FabricEni, ip: string): Promise<void> {
    const fab = this.ns.name;
    await sh(["ip", "route", "replace", `${ip}/32`, "dev", eni.fabricSide], { netns: fab });
    await sh(
      ["ip", "neigh", "replace", ip, "lladdr", eni.mac, "nud", "permanent", "dev", eni.fabricSide],
      { netns: fab },
    );
    await this.nft(`add element netdev ${TABLE} own_${eni.fabricSide} { ${ip} }`);
    eni.ips.push(ip);
  }

  /** Frames the fabric dropped from `eni` because it did not own their source. */
  async drops(eni: FabricEni): Promise<number> {
    const out = await sh(["nft", "list", "chain", "netdev", TABLE, `in_${eni.fabricSide}`], {
      netns: this.ns.name,
    });
    return [...out.matchAll(/counter packets (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  }

  /** Deletes the fabric netns (its veths, and so the nodes' ENI links, go with it). */
  async destroy(): Promise<void> {
    await deleteNetns(this.ns.name);
  }
}
