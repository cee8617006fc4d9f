/**
 * Egress beyond the VPC on the real kernel: one simulated node (its ENIs wired by the sim's
 * fabric), a pod on a secondary ENI wired by a datapath, and the internet netns behind the
 * fabric's internet gateway (aws/sim/internet.ts). The egress ruleset is planned and applied
 * as the daemon does it (ipam/egress), and the far ends say which source address they see.
 *
 * @module
 */
import { inNetns } from "../../netlink/mod.ts";
import { attachPod, type DatapathConfig, type DatapathKind } from "../../cni/datapath/mod.ts";
import { defaultFaults, SimState } from "../../aws/sim/mod.ts";
import { checkScenario } from "../../aws/sim/scenario.ts";
import { attachNetworkInterface } from "../../aws/sim/attachments.ts";
import { Fabric } from "../../aws/sim/fabric.ts";
import { Internet } from "../../aws/sim/internet.ts";
import { type EgressFacts, planEgress, type PoolEgress } from "../../ipam/egress/plan.ts";
import { applyEgress, type EgressApplyResult } from "../../ipam/egress/apply.ts";
import { findLinkByMac, NetlinkSocket } from "../../netlink/mod.ts";
import { createNetns, deleteNetns, type TestNetns, uniqueName } from "./netns.ts";
import { eniOf } from "./datapath_simfabric.ts";
import { run, sh } from "./sh.ts";

const PEER = new URL("./peer_addr.ts", import.meta.url).pathname;
/** The node's primary address (the one the internet gateway maps). */
export const NODE_IP = "10.7.0.10";
/** The pod's address, a secondary address of the node's ENI #1. */
export const POD_IP = "10.7.1.20";
const PORT = 7070;

function scenario() {
  return checkScenario({
    region: "us-west-2",
    vpc: { id: "vpc-0e", cidrs: ["10.7.0.0/16"] },
    subnets: [
      { id: "subnet-0a", cidr: "10.7.0.0/24", az: "us-west-2a" },
      { id: "subnet-0b", cidr: "10.7.1.0/24", az: "us-west-2a" },
    ],
    securityGroups: [{ id: "sg-0a", name: "default" }],
    instances: [{
      id: "i-01",
      type: "m5.large",
      subnet: "subnet-0a",
      securityGroups: ["sg-0a"],
      primaryIp: NODE_IP,
    }],
  });
}

/**
 * Starts a far end in `netns` on `addr` that answers each connection with the address it
 * sees; kill the returned process to stop it.
 */
export async function startFarEnd(netns: string, addr: string): Promise<Deno.ChildProcess> {
  const child = new Deno.Command("ip", {
    args: [
      "netns",
      "exec",
      netns,
      Deno.execPath(),
      "run",
      "--allow-net",
      "--no-check",
      PEER,
      "serve",
      addr,
      String(PORT),
    ],
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  reader.releaseLock();
  if (!new TextDecoder().decode(value).includes("ready")) {
    child.kill("SIGKILL");
    throw new Error(`far end on ${addr} in ${netns} did not start`);
  }
  return child;
}

/** Asks the far end at `addr` from `netns`: the address it saw, or "unreachable". */
export async function askFarEnd(netns: string, addr: string): Promise<string> {
  const r = await run(
    [Deno.execPath(), "run", "--allow-net", "--no-check", PEER, "ask", addr, String(PORT)],
    { netns },
  );
  return r.stdout.trim();
}

/** A node with one pod, the fabric and the internet; {@linkcode EgressWorld.close} undoes it. */
export class EgressWorld {
  private servers: Deno.ChildProcess[] = [];

  private constructor(
    readonly kind: DatapathKind,
    readonly state: SimState,
    readonly node: TestNetns,
    readonly pod: TestNetns,
    readonly fabric: Fabric,
    readonly internet: Internet,
    /** ENI #1's own primary address (on its link in the node). */
    readonly eni1Ip: string,
    readonly eni1Mac: string,
    readonly eth0Mac: string,
  ) {}

  /** Builds the world and wires the pod with `kind`. */
  static async create(kind: DatapathKind): Promise<EgressWorld> {
    const state = new SimState(scenario(), defaultFaults());
    const made: TestNetns[] = [];
    let fabric: Fabric | undefined;
    try {
      const node = await createNetns(uniqueName("egn"));
      made.push(node);
      const pod = await createNetns(uniqueName("egp"));
      made.push(pod);
      fabric = await Fabric.create({ name: uniqueName("egf") });
      fabric.addNode({ instanceId: "i-01", netns: node.name });
      const eni = state.createNetworkInterface({ subnetId: "subnet-0b", secondaryIps: [POD_IP] });
      attachNetworkInterface(state, eni.id, "i-01", 1, 0, true);
      await fabric.sync(state);
      const internet = await Internet.create({
        name: uniqueName("egi"),
        fabric,
        vpcCidrs: ["10.7.0.0/16"],
        publicSources: [NODE_IP],
      });
      const e = eniOf(state, eni.id);
      const cfg: DatapathConfig = {
        kind,
        mtu: 9001,
        serviceCidrs: [],
        nodeIps: [NODE_IP],
        hostVethPrefix: "vpc",
      };
      inNetns(node.path, () =>
        attachPod(cfg, {
          containerId: `egress-${pod.name}`,
          ifName: "eth0",
          netns: pod.path,
          address: { ip: POD_IP, prefixLen: 24, gateway: e.gateway, eni: e },
        }));
      const primaryMac = [...state.enis.values()].find((x) =>
        x.attachment?.deviceIndex === 0 && x.attachment.instanceId === "i-01"
      )!.mac;
      return new EgressWorld(
        kind,
        state,
        node,
        pod,
        fabric,
        internet,
        e.primaryIp!,
        e.mac,
        primaryMac,
      );
    } catch (err) {
      await fabric?.destroy();
      for (const ns of made) await deleteNetns(ns.name);
      state.close();
      throw err;
    }
  }

  /** The facts the daemon would gather for one pool on subnet B. */
  facts(pool: Partial<PoolEgress>): EgressFacts {
    using rt = NetlinkSocket.openIn(this.node.path);
    return {
      nodeIp: NODE_IP,
      vpcCidrs: ["10.7.0.0/16"],
      enis: [
        { deviceIndex: 0, ifindex: findLinkByMac(rt, this.eth0Mac)?.index, table: 254 },
        { deviceIndex: 1, ifindex: findLinkByMac(rt, this.eni1Mac)?.index, table: 101 },
      ],
      pools: [{
        name: "pods",
        snat: "node",
        excludeCidrs: [],
        randomFully: true,
        sourceCidrs: ["10.7.1.0/24"],
        ...pool,
      }],
    };
  }

  /** Plans and applies the ruleset in the node, as the daemon does. */
  apply(pool: Partial<PoolEgress>): EgressApplyResult {
    return applyEgress(planEgress(this.facts(pool)), this.node.path);
  }

  /** Starts a far end in `netns` on `addr` that answers with the address it sees. */
  async serve(netns: string, addr: string): Promise<void> {
    this.servers.push(await startFarEnd(netns, addr));
  }

  /** Asks the far end at `addr` from `netns`: the address it saw, or "unreachable". */
  ask(netns: string, addr: string): Promise<string> {
    return askFarEnd(netns, addr);
  }

  /** Removes everything the world made. */
  async close(): Promise<void> {
    for (const s of this.servers) {
      try {
        s.kill("SIGKILL");
      } catch { /* already gone */ }
      await s.status;
    }
    await this.internet.destroy();
    await this.fabric.destroy();
    await deleteNetns(this.pod.name);
    await deleteNetns(this.node.name);
    this.state.close();
  }
}

/**
 * The egress cases on datapath `kind`; returns a line per failure ([] = all passed). With
 * `hostSeesPods` false (ipvlan-l2) the pod must stay cut off from the internet even with
 * the ruleset in place, since its packets never reach the host.
 */
export async function egressFailures(kind: DatapathKind, hostSeesPods: boolean): Promise<string[]> {
  const failures: string[] = [];
  const expect = (what: string, ok: boolean, detail = "") => {
    if (!ok) failures.push(`${kind}: ${what}${detail ? `: ${detail}` : ""}`);
  };
  const w = await EgressWorld.create(kind);
  try {
    const net = w.internet;
    await w.serve(net.netns, net.publicHost);
    await w.serve(net.netns, net.onPremHost);

    let seen = await w.ask(w.pod.name, net.publicHost);
    expect("no SNAT: the internet gateway drops the pod's address", seen === "unreachable", seen);
    seen = await w.ask(w.pod.name, net.onPremHost);
    expect("no SNAT: on-premises sees the pod's address", seen === POD_IP, seen);

    const first = w.apply({ snat: "node", excludeCidrs: ["192.0.2.0/24"] });
    expect("first apply creates the table", first.tableChanged);
    const again = w.apply({ snat: "node", excludeCidrs: ["192.0.2.0/24"] });
    expect(
      "second apply finds nothing to do",
      !again.tableChanged && again.diff.missing.length === 0 && again.diff.stray.length === 0,
      JSON.stringify(again.diff),
    );
    seen = await w.ask(w.pod.name, net.publicHost);
    if (hostSeesPods) expect("SNAT: the internet sees the node's address", seen === NODE_IP, seen);
    else {expect(
        "ipvlan-l2: the pod stays cut off (the host never sees it)",
        seen === "unreachable",
        seen,
      );}
    seen = await w.ask(w.pod.name, net.onPremHost);
    expect("excluded CIDR: on-premises still sees the pod's address", seen === POD_IP, seen);

    if (kind === "veth") {
      // A Service (kube-proxy-style DNAT, mark 0x4000 kept for its masquerade rule) whose
      // endpoint is in the VPC: the endpoint decides, so it leaves by the pod's ENI unSNATed.
      await w.serve(w.fabric.netns, "10.7.1.1");
      await sh(["nft", "-f", "-"], {
        netns: w.node.name,
        stdin: [
          "table ip kubeproxy {",
          "  chain pre { type nat hook prerouting priority dstnat; ip daddr 10.96.0.10 tcp dport 7070 meta mark set meta mark | 0x4000 dnat to 10.7.1.1; }",
          "  chain post { type nat hook postrouting priority srcnat; meta mark & 0x4000 == 0x4000 counter; }",
          "}",
          "",
        ].join("\n"),
      });
      seen = await w.ask(w.pod.name, "10.96.0.10");
      expect(
        "ClusterIP with a VPC endpoint: reached with the pod's address",
        seen === POD_IP,
        seen,
      );
      const kp = await run(["nft", "list", "chain", "ip", "kubeproxy", "post"], {
        netns: w.node.name,
      });
      expect(
        "kube-proxy's 0x4000 mark survives vpcni's",
        /packets [1-9]/.test(kp.stdout),
        kp.stdout,
      );
    }

    // A connection that enters through ENI #1 is answered through ENI #1, not main's eth0
    // (whose VPC port drops a source address eth0 does not own).
    await w.serve(w.node.name, "0.0.0.0");
    seen = await w.ask(net.netns, w.eni1Ip);
    expect(
      "connection into ENI #1's address is answered through ENI #1",
      seen !== "unreachable",
      seen,
    );

    const off = w.apply({ snat: "none" });
    expect("snat none removes the table", off.tableChanged);
    seen = await w.ask(w.pod.name, net.publicHost);
    expect("SNAT off again: unreachable", seen === "unreachable", seen);
    const left = await run(["nft", "list", "tables"], { netns: w.node.name });
    expect("no table left", !/vpcni/.test(left.stdout), left.stdout);
    const rules = await run(["ip", "rule"], { netns: w.node.name });
    expect("no mark rule left", !/1500:/.test(rules.stdout), rules.stdout);
    return failures;
  } finally {
    await w.close();
  }
}
