/**
 * Pods wired by a datapath over the simulator's own fabric (aws/sim/fabric.ts): ENIs are
 * created, attached and given addresses in the simulated EC2 state, the fabric wires them
 * into two node netns, and the datapath wires pods to them. The sim fabric is stricter than
 * a plain router: it ARPs for every address it delivers and drops ARP whose sender address
 * the ENI does not own.
 *
 * @module
 */
import { inNetns } from "../../netlink/mod.ts";
import { formatIpv4, formatIpv4Cidr } from "../../base/ipv4.ts";
import {
  attachPod,
  checkPod,
  type DatapathConfig,
  type DatapathEni,
  type DatapathKind,
  detachPod,
  type PodAttachment,
} from "../../cni/datapath/mod.ts";
import { defaultFaults, SimState } from "../../aws/sim/mod.ts";
import { checkScenario } from "../../aws/sim/scenario.ts";
import { attachNetworkInterface } from "../../aws/sim/attachments.ts";
import { Fabric } from "../../aws/sim/fabric.ts";
import { createNetns, deleteNetns, type TestNetns, uniqueName } from "./netns.ts";
import { run } from "./sh.ts";

function scenario() {
  return checkScenario({
    region: "us-west-2",
    vpc: { id: "vpc-0a", cidrs: ["10.7.0.0/16"] },
    subnets: [
      { id: "subnet-0a", cidr: "10.7.0.0/24", az: "us-west-2a" },
      { id: "subnet-0b", cidr: "10.7.1.0/24", az: "us-west-2a" },
    ],
    securityGroups: [{ id: "sg-0a", name: "default" }],
    instances: [
      {
        id: "i-01",
        type: "m5.large",
        subnet: "subnet-0a",
        securityGroups: ["sg-0a"],
        primaryIp: "10.7.0.10",
      },
      {
        id: "i-02",
        type: "m5.large",
        subnet: "subnet-0a",
        securityGroups: ["sg-0a"],
        primaryIp: "10.7.0.11",
      },
    ],
  });
}

/** The datapath's view of a simulated ENI. */
export function eniOf(state: SimState, eniId: string): DatapathEni {
  const e = state.eni(eniId);
  const subnet = state.subnets.get(e.subnetId)!;
  return {
    id: e.id,
    mac: e.mac,
    deviceIndex: e.attachment!.deviceIndex,
    primary: e.attachment!.deviceIndex === 0,
    subnetId: e.subnetId,
    subnetCidr: formatIpv4Cidr(subnet.cidr),
    gateway: formatIpv4(subnet.cidr.address + 1),
    routeTable: 0,
    primaryIp: e.privateIps.find((p) => p.primary)!.address,
  };
}

/**
 * Two simulated nodes, a secondary ENI each in subnet B, one pod on each ENI wired with
 * `kind`; runs the cases and returns a line per failure ([] = all passed).
 */
export async function simFabricFailures(kind: DatapathKind): Promise<string[]> {
  const cfg: DatapathConfig = {
    kind,
    mtu: 9001,
    serviceCidrs: [],
    nodeIps: [],
    hostVethPrefix: "vpc",
  };
  const failures: string[] = [];
  const expect = (what: string, ok: boolean, detail = "") => {
    if (!ok) failures.push(`${kind}: ${what}${detail ? `: ${detail}` : ""}`);
  };
  const state = new SimState(scenario(), defaultFaults());
  const made: TestNetns[] = [];
  let fabric: Fabric | undefined;
  try {
    const nodes = [await createNetns(uniqueName("vdpsn")), await createNetns(uniqueName("vdpsn"))];
    made.push(...nodes);
    fabric = await Fabric.create({ name: uniqueName("vdpsf") });
    const podIps = ["10.7.1.20", "10.7.1.30"];
    const enis: DatapathEni[] = [];
    for (const [i, inst] of ["i-01", "i-02"].entries()) {
      fabric.addNode({ instanceId: inst, netns: nodes[i].name });
      const eni = state.createNetworkInterface({
        subnetId: "subnet-0b",
        secondaryIps: [podIps[i]],
      });
      attachNetworkInterface(state, eni.id, inst, 1, 0, true);
      enis.push(eniOf(state, eni.id));
    }
    await fabric.sync(state);

    const pods: PodAttachment[] = [];
    const podNs: TestNetns[] = [];
    for (const [i, node] of nodes.entries()) {
      const ns = await createNetns(uniqueName("vdpsp"));
      made.push(ns);
      podNs.push(ns);
      const a: PodAttachment = {
        containerId: `sim-${ns.name}`,
        ifName: "eth0",
        netns: ns.path,
        address: { ip: podIps[i], prefixLen: 24, gateway: enis[i].gateway, eni: enis[i] },
      };
      inNetns(node.path, () => attachPod(cfg, a));
      const problems = inNetns(node.path, () => checkPod(cfg, a));
      expect(`CHECK after ADD on node ${i + 1}`, problems.length === 0, problems.join("; "));
      pods.push(a);
    }
    const ping = async (from: string, to: string) =>
      /[1-3] received/.test(
        (await run(["ping", "-c", "3", "-i", "0.2", "-W", "1", to], { netns: from })).stdout,
      );
    expect("pod→pod across nodes", await ping(podNs[0].name, podIps[1]));
    expect("pod→pod across nodes, reverse", await ping(podNs[1].name, podIps[0]));
    expect("pod→own node", await ping(podNs[0].name, "10.7.0.10"));
    expect("pod→other node", await ping(podNs[0].name, "10.7.0.11"));
    expect("node→pod", await ping(nodes[0].name, podIps[0]));
    expect("other node→pod", await ping(nodes[1].name, podIps[0]));
    // The secondary ENI's link carries the ENI's primary address, without a route in main.
    const addr = await run(["ip", "-4", "addr", "show", "eth1"], { netns: nodes[0].name });
    expect(
      "ENI primary address on eth1 (noprefixroute)",
      new RegExp(`inet ${enis[0].primaryIp!.replaceAll(".", "\\.")}/24 .*noprefixroute`).test(
        addr.stdout,
      ),
      addr.stdout,
    );
    const main = await run(["ip", "route", "show", "table", "main"], { netns: nodes[0].name });
    expect("no subnet-B route in main", !/10\.7\.1\.0\/24/.test(main.stdout), main.stdout);

    for (const [i, node] of nodes.entries()) inNetns(node.path, () => detachPod(cfg, pods[i]));
    const rules = await run(["ip", "rule"], { netns: nodes[0].name });
    expect("rules gone after DEL", !/10\.7\.1\.20/.test(rules.stdout), rules.stdout);
    const left = await run(["ip", "-o", "link"], { netns: podNs[0].name });
    expect("pod netns empty after DEL", left.stdout.trim().split("\n").length === 1, left.stdout);
    return failures;
  } finally {
    await fabric?.destroy();
    for (const ns of made) await deleteNetns(ns.name);
    state.close();
  }
}
