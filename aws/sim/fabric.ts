/**
 * The fabric: a network namespace that plays the VPC for the simulator's nodes. Each
 * attached ENI becomes a veth pair between the node netns (named `ethN`, N = device index,
 * MAC = the ENI's MAC) and the fabric netns. The fabric routes every IP and /28 prefix to
 * the ENI that owns it (/32 and /28 routes), answers ARP for subnet gateways (local
 * addresses) and for addresses behind other ENIs (proxy ARP), and drops frames whose source
 * MAC or IP the sending ENI does not own (an nftables netdev ingress chain per veth).
 *
 * This is test and demo scaffolding: it shells out to `ip`, `sh` and `nft`, and needs root.
 *
 * @module
 */
import type { SimServer } from "./mod.ts";
import type { EniState, SimState } from "./state.ts";
import { formatIpv4 } from "../../base/ipv4.ts";
import { mustRunTool, runTool } from "./tool.ts";

const MTU = 9001;
const TABLE = "vpcfab";

const run = runTool;
const must = (cmd: string[], stdin?: string) => mustRunTool("fabric", cmd, stdin);

/** What the fabric has wired for one ENI. */
interface Wired {
  eniId: string;
  fabIf: string;
  nodeNetns: string;
  nodeIf: string;
  mac: string;
  /** Owned addresses as routed: `a.b.c.d/32` and `/28` prefixes. */
  owned: Set<string>;
}

/** What one attached ENI should look like. */
interface Wanted {
  eni: EniState;
  nodeNetns: string;
  nodeIf: string;
  owned: Set<string>;
}

/** A VPC fabric netns joined to node netns; see the module doc. */
export class Fabric {
  /** Name of the fabric netns. */
  readonly netns: string;
  #nodes = new Map<string, string>();
  #wired = new Map<string, Wired>();
  #gateways = new Set<string>();
  #counter = 0;
  #queue: Promise<void> = Promise.resolve();
  #pending = false;
  #unfollow?: () => void;
  #lastError?: Error;

  private constructor(netns: string) {
    this.netns = netns;
  }

  /** Creates the fabric netns `name` (a routing, proxy-ARP namespace with an nft table). */
  static async create(o: { name: string }): Promise<Fabric> {
    if (Deno.uid() !== 0) throw new Error("the fabric needs root (ip netns, nft)");
    const f = new Fabric(o.name);
    await must(["ip", "netns", "add", f.netns]);
    try {
      await must(["ip", "-n", f.netns, "link", "set", "lo", "up"]);
      await f.#sysctl([
        ["net/ipv4/ip_forward", "1"],
        ["net/ipv4/conf/all/rp_filter", "0"],
        ["net/ipv4/conf/default/rp_filter", "0"],
        ["net/ipv4/conf/default/proxy_arp", "1"],
        ["net/ipv4/conf/all/send_redirects", "0"],
        ["net/ipv4/conf/default/send_redirects", "0"],
      ]);
      await must(["ip", "netns", "exec", f.netns, "nft", "-f", "-"], `add table netdev ${TABLE}\n`);
    } catch (e) {
      await run(["ip", "netns", "del", f.netns]);
      throw e;
    }
    return f;
  }

  /** Declares that instance `instanceId` lives in the existing netns `netns`. */
  addNode(o: { instanceId: string; netns: string }): void {
    this.#nodes.set(o.instanceId, o.netns);
  }

  /** The fabric-side veth of an ENI, when wired. */
  fabricInterfaceOf(eniId: string): string | undefined {
    return this.#wired.get(eniId)?.fabIf;
  }

  /** The last error a followed sync hit (follow cannot throw to anyone). */
  get lastError(): Error | undefined {
    return this.#lastError;
  }

  /** Makes veths, routes and filters match the sim (attached ENIs of known nodes). */
  sync(state: SimState): Promise<void> {
    const job = this.#queue.then(() => this.#syncNow(state));
    this.#queue = job.catch(() => {});
    return job;
  }

  /** Syncs on every sim change (coalesced); {@linkcode idle} waits for it to settle. */
  follow(sim: Pick<SimServer, "state">): void {
    this.#unfollow?.();
    this.#unfollow = sim.state.onChange(() => {
      if (this.#pending) return;
      this.#pending = true;
      this.#queue = this.#queue.then(async () => {
        this.#pending = false;
        try {
          await this.#syncNow(sim.state);
          this.#lastError = undefined;
        } catch (e) {
          this.#lastError = e as Error;
          console.error(`fabric sync failed: ${(e as Error).message}`);
        }
      });
    });
    void this.sync(sim.state).catch((e) => {
      this.#lastError = e as Error;
    });
  }

  /** Resolves once every queued sync finished; throws the last followed sync's error. */
  async idle(): Promise<void> {
    let q;
    do {
      q = this.#queue;
      await q;
    } while (q !== this.#queue);
    if (this.#lastError) throw this.#lastError;
  }

  /** Stops following and deletes the fabric netns (its veths and their node ends go too). */
  async destroy(): Promise<void> {
    this.#unfollow?.();
    this.#unfollow = undefined;
    await this.#queue.catch(() => {});
    await run(["ip", "netns", "del", this.netns]);
    this.#wired.clear();
  }

  async #sysctl(pairs: [string, string][]): Promise<void> {
    const script = pairs.map(([k, v]) => `echo ${v} > /proc/sys/${k}`).join(" && ");
    await must(["ip", "netns", "exec", this.netns, "sh", "-c", script]);
  }

  #wanted(state: SimState): Map<string, Wanted> {
    const out = new Map<string, Wanted>();
    for (const eni of state.enis.values()) {
      const a = eni.attachment;
      if (!a || a.status !== "attached") continue;
      const nodeNetns = this.#nodes.get(a.instanceId);
      if (!nodeNetns) continue;
      const owned = new Set<string>([
        ...eni.privateIps.map((x) => `${x.address}/32`),
        ...eni.prefixes.map((p) => p.cidr),
      ]);
      out.set(eni.id, { eni, nodeNetns, nodeIf: `eth${a.deviceIndex}`, owned });
    }
    return out;
  }

  async #syncNow(state: SimState): Promise<void> {
    await this.#ensureGateways(state);
    const wanted = this.#wanted(state);
    for (const [id, w] of [...this.#wired]) {
      const want = wanted.get(id);
      if (!want || want.nodeNetns !== w.nodeNetns || want.nodeIf !== w.nodeIf) {
        await this.#unwire(w);
      }
    }
    for (const [id, want] of wanted) {
      let w = this.#wired.get(id);
      if (!w) w = await this.#wire(state, want);
      await this.#updateOwned(w, want.owned);
    }
  }

  async #ensureGateways(state: SimState): Promise<void> {
    const cmds: string[] = [];
    for (const s of state.subnets.values()) {
      const gw = formatIpv4(s.cidr.address + 1);
      if (this.#gateways.has(gw)) continue;
      this.#gateways.add(gw);
      cmds.push(`address add ${gw}/32 dev lo`);
    }
    if (cmds.length > 0) {
      await must(["ip", "-n", this.netns, "-batch", "-"], cmds.join("\n") + "\n");
    }
  }

  async #wire(state: SimState, want: Wanted): Promise<Wired> {
    const fabIf = `f${++this.#counter}`;
    const { eni, nodeNetns, nodeIf } = want;
    // A leftover interface of the same name in the node would make the add fail.
    await run(["ip", "-n", nodeNetns, "link", "del", nodeIf]);
    await must([
      "ip",
      "-n",
      this.netns,
      "link",
      "add",
      fabIf,
      "mtu",
      String(MTU),
      "type",
      "veth",
      "peer",
      "name",
      nodeIf,
      "address",
      eni.mac,
      "mtu",
      String(MTU),
      "netns",
      nodeNetns,
    ]);
    const w: Wired = { eniId: eni.id, fabIf, nodeNetns, nodeIf, mac: eni.mac, owned: new Set() };
    this.#wired.set(eni.id, w);
    await this.#sysctl([
      [`net/ipv4/conf/${fabIf}/proxy_arp`, "1"],
      [`net/ipv4/conf/${fabIf}/rp_filter`, "0"],
      [`net/ipv4/neigh/${fabIf}/proxy_delay`, "0"],
      [`net/ipv6/conf/${fabIf}/disable_ipv6`, "1"],
    ]);
    await must(["ip", "-n", this.netns, "link", "set", fabIf, "up"]);
    await must(
      ["ip", "netns", "exec", this.netns, "nft", "-f", "-"],
      [
        `add set netdev ${TABLE} own_${fabIf} { type ipv4_addr; flags interval; }`,
        `add chain netdev ${TABLE} in_${fabIf} { type filter hook ingress device "${fabIf}" priority 0; policy accept; }`,
        `add rule netdev ${TABLE} in_${fabIf} ether saddr != ${eni.mac} counter drop`,
        `add rule netdev ${TABLE} in_${fabIf} ether type arp arp saddr ip != 0.0.0.0 arp saddr ip != @own_${fabIf} counter drop`,
        `add rule netdev ${TABLE} in_${fabIf} ether type ip ip saddr != @own_${fabIf} counter drop`,
        `add rule netdev ${TABLE} in_${fabIf} ether type != { ip, arp } counter drop`,
        "",
      ].join("\n"),
    );
    if (eni.attachment!.deviceIndex === 0) {
      // The node's primary interface comes up configured, as on a booted instance.
      const subnet = state.subnets.get(eni.subnetId)!;
      const primary = eni.privateIps.find((x) => x.primary)!.address;
      await must(
        ["ip", "-n", nodeNetns, "-batch", "-"],
        [
          `address add ${primary}/${subnet.cidr.prefixLen} dev ${nodeIf}`,
          `link set ${nodeIf} up`,
          `route add default via ${formatIpv4(subnet.cidr.address + 1)} dev ${nodeIf}`,
          "",
        ].join("\n"),
      );
    }
    return w;
  }

  async #updateOwned(w: Wired, owned: Set<string>): Promise<void> {
    const added = [...owned].filter((a) => !w.owned.has(a));
    const removed = [...w.owned].filter((a) => !owned.has(a));
    if (added.length === 0 && removed.length === 0) return;
    const elements = [...owned].map((a) => a.endsWith("/32") ? a.slice(0, -3) : a);
    await must(
      ["ip", "netns", "exec", this.netns, "nft", "-f", "-"],
      [
        `flush set netdev ${TABLE} own_${w.fabIf}`,
        elements.length > 0
          ? `add element netdev ${TABLE} own_${w.fabIf} { ${elements.join(", ")} }`
          : "",
        "",
      ].join("\n"),
    );
    const cmds = [
      ...removed.map((a) => `route del ${a} dev ${w.fabIf}`),
      ...added.map((a) => `route replace ${a} dev ${w.fabIf}`),
    ];
    await must(["ip", "-n", this.netns, "-batch", "-"], cmds.join("\n") + "\n");
    w.owned = new Set(owned);
  }

  async #unwire(w: Wired): Promise<void> {
    await run(
      ["ip", "netns", "exec", this.netns, "nft", "-f", "-"],
      [
        `delete chain netdev ${TABLE} in_${w.fabIf}`,
        `delete set netdev ${TABLE} own_${w.fabIf}`,
        "",
      ].join("\n"),
    );
    await run(["ip", "-n", this.netns, "link", "del", w.fabIf]);
    this.#wired.delete(w.eniId);
  }
}
