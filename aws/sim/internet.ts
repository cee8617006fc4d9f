/**
 * The world beyond the VPC, for the fabric (aws/sim/fabric.ts): an "internet" netns joined
 * to the fabric netns by a veth, the fabric's default route pointing at it. It holds two
 * hosts on its loopback:
 *
 * - an internet host, reached through the "internet gateway": like AWS's, it only carries
 *   traffic from addresses it maps to a public one (an instance's primary address); traffic
 *   from any other VPC address (a pod's secondary address) is dropped;
 * - an on-premises host, reached as through a VPN or Direct Connect: any VPC address may
 *   reach it unchanged (the case for `snatExcludeCidrs`).
 *
 * Test and demo scaffolding like the fabric: it shells out to `ip` and `nft`, and needs root.
 *
 * @module
 */
import type { Fabric } from "./fabric.ts";
import { mustRunTool } from "./tool.ts";

/** Where the two hosts live, and the transit link's addresses. */
export const INTERNET_DEFAULTS = {
  /** The internet host (TEST-NET-2). */
  publicHost: "198.51.100.10",
  /** The on-premises host (TEST-NET-1). */
  onPremHost: "192.0.2.10",
  /** The fabric's end of the transit link (the internet gateway). */
  gatewayAddress: "100.127.255.1",
  /** The internet's end of the transit link. */
  internetAddress: "100.127.255.2",
} as const;

const must = (cmd: string[], stdin?: string) => mustRunTool("internet", cmd, stdin);

/** The internet netns behind a fabric; see the module doc. */
export class Internet {
  /** Name of the internet netns. */
  readonly netns: string;
  /** The internet host's address. */
  readonly publicHost = INTERNET_DEFAULTS.publicHost;
  /** The on-premises host's address. */
  readonly onPremHost = INTERNET_DEFAULTS.onPremHost;

  private constructor(netns: string) {
    this.netns = netns;
  }

  /**
   * Creates the internet netns `name` behind `fabric`, routing `vpcCidrs` back to it; the
   * gateway carries traffic from `publicSources` only (see {@linkcode setPublicSources}).
   */
  static async create(
    o: { name: string; fabric: Fabric; vpcCidrs: string[]; publicSources: string[] },
  ): Promise<Internet> {
    const net = new Internet(o.name);
    const d = INTERNET_DEFAULTS;
    await must(["ip", "netns", "add", net.netns]);
    try {
      await must(
        ["ip", "-n", o.fabric.netns, "-batch", "-"],
        [
          `link add igw type veth peer name wan netns ${net.netns}`,
          `address add ${d.gatewayAddress}/30 dev igw`,
          "link set igw up",
          `route add default via ${d.internetAddress} dev igw`,
          "",
        ].join("\n"),
      );
      await must(
        ["ip", "-n", net.netns, "-batch", "-"],
        [
          "link set lo up",
          `address add ${d.internetAddress}/30 dev wan`,
          "link set wan up",
          `address add ${d.publicHost}/32 dev lo`,
          `address add ${d.onPremHost}/32 dev lo`,
          ...o.vpcCidrs.map((c) => `route add ${c} via ${d.gatewayAddress} dev wan`),
          "",
        ].join("\n"),
      );
      await must(
        ["ip", "netns", "exec", net.netns, "nft", "-f", "-"],
        [
          "table ip igw {",
          "  set public { type ipv4_addr; }",
          "  chain in {",
          "    type filter hook prerouting priority -300; policy accept;",
          `    iifname "wan" ip daddr ${d.publicHost} ip saddr != @public counter drop`,
          "  }",
          "}",
          "",
        ].join("\n"),
      );
      await net.setPublicSources(o.publicSources);
    } catch (e) {
      await net.destroy();
      throw e;
    }
    return net;
  }

  /** The VPC addresses the internet gateway maps to public ones (and so carries). */
  async setPublicSources(ips: string[]): Promise<void> {
    await must(
      ["ip", "netns", "exec", this.netns, "nft", "-f", "-"],
      [
        "flush set ip igw public",
        ips.length ? `add element ip igw public { ${ips.join(", ")} }` : "",
        "",
      ].join("\n"),
    );
  }

  /** Packets the gateway dropped because their source had no public mapping. */
  async droppedPackets(): Promise<number> {
    const out = await must([
      "ip",
      "netns",
      "exec",
      this.netns,
      "nft",
      "-j",
      "list",
      "chain",
      "ip",
      "igw",
      "in",
    ]);
    const m = /"packets":\s*(\d+)/.exec(out);
    return m ? Number(m[1]) : 0;
  }

  /** Deletes the internet netns (the fabric's end of the link goes with it). */
  async destroy(): Promise<void> {
    await new Deno.Command("ip", { args: ["netns", "del", this.netns], stderr: "null" })
      .output();
  }
}
