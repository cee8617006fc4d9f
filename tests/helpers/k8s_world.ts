/**
 * The VPC the lane's nodes live in: the EC2 + IMDS simulator with subnets and security
 * groups tagged the way examples/kubernetes/vpcni-daemonset.yaml selects them, its fabric,
 * and per node an instance and a network namespace holding its ENIs, with the simulator's
 * EC2 endpoint and the instance's own IMDS view reachable on the node's loopback (as a real
 * node reaches its regional endpoint and 169.254.169.254). Every node sees both at the same
 * loopback URLs, so one DaemonSet manifest serves all of them.
 *
 * @module
 */
import { type ScenarioInput, type SimServer, startSim } from "../../aws/sim/mod.ts";
import { Fabric } from "../../aws/sim/fabric.ts";
import { forwardIntoNetns, type NetnsForward } from "../../aws/sim/netns_forward.ts";
import { formatIpv4Cidr } from "../../base/ipv4.ts";
import { createNamedNetns, deleteNamedNetns } from "../../netlink/netns_named.ts";
import { NetlinkSocket } from "../../netlink/socket.ts";
import { setLinkUp } from "../../netlink/link.ts";

/** Instance id of the lane's `i`-th node (0-based). */
export function laneInstance(i: number): string {
  return `i-0c85000000000${String(i + 1).padStart(2, "0")}`;
}

/** The first lane node's instance id. */
export const LANE_INSTANCE = laneInstance(0);

/** Subnet of the example's `public` pool: a /28, so the pool runs out after a few pods. */
export const PUBLIC_SUBNET = "10.43.16.0/28";

/** Subnet of the example's `internal` pool in the node's AZ. */
export const INTERNAL_SUBNET = "10.43.32.0/20";

/** The scenario for `nodes` instances: tags match the example's pool selectors. */
export function laneScenario(nodes = 1): ScenarioInput {
  return {
    region: "us-east-1",
    vpc: { id: "vpc-0c850001", cidrs: ["10.43.0.0/16"] },
    subnets: [
      { id: "subnet-0c850001", cidr: "10.43.0.0/24", az: "us-east-1a", tags: { zone: "nodes" } },
      { id: "subnet-0c850002", cidr: PUBLIC_SUBNET, az: "us-east-1a", tags: { zone: "public" } },
      {
        id: "subnet-0c850003",
        cidr: INTERNAL_SUBNET,
        az: "us-east-1a",
        tags: { zone: "internal" },
      },
      // Tagged internal but deprecated: the example's selector `zone in (internal),!deprecated`
      // must skip it.
      {
        id: "subnet-0c850004",
        cidr: "10.43.64.0/20",
        az: "us-east-1a",
        tags: { zone: "internal", deprecated: "true" },
      },
      // Same tags, other AZ: never for a node in us-east-1a.
      {
        id: "subnet-0c850005",
        cidr: "10.43.48.0/20",
        az: "us-east-1b",
        tags: { zone: "internal" },
      },
    ],
    securityGroups: [
      { id: "sg-0c850001", name: "nodes", tags: { role: "nodes" } },
      { id: "sg-0c850002", name: "public-pods", tags: { "vpcni.io/role": "public-pods" } },
    ],
    instances: Array.from({ length: nodes }, (_, i) => ({
      id: laneInstance(i),
      type: "m5.xlarge",
      subnet: "subnet-0c850001",
      securityGroups: ["sg-0c850001"],
      az: "us-east-1a",
    })),
  };
}

/** One node's place in the VPC. */
export interface WorldNode {
  instanceId: string;
  /** Name of the node netns (under /run/netns). */
  netns: string;
  netnsPath: string;
  /** The node's primary address (its first ENI's primary private IP). */
  ip: string;
}

/** The running VPC and node netns. */
export interface LaneWorld {
  sim: SimServer;
  fabric: Fabric;
  /** Every node, first one first. */
  nodes: WorldNode[];
  /** The first node's netns name, path and address. */
  nodeNetns: string;
  nodePath: string;
  nodeIp: string;
  /** EC2 endpoint as seen from inside every node. */
  ec2Url: string;
  /** IMDS endpoint as seen from inside every node (each node gets its own instance's view). */
  imdsUrl: string;
  close(): Promise<void>;
}

/** Starts the simulator, the fabric and the node netns `<prefix>-node`, `<prefix>-node2`, …. */
export async function startWorld(prefix: string, count = 1): Promise<LaneWorld> {
  const sim = await startSim({ scenario: laneScenario(count) });
  const nodes: WorldNode[] = Array.from({ length: count }, (_, i) => {
    const netns = `${prefix}-node${i === 0 ? "" : i + 1}`;
    return { instanceId: laneInstance(i), netns, netnsPath: `/run/netns/${netns}`, ip: "" };
  });
  let fabric: Fabric | undefined;
  const forwards: NetnsForward[] = [];
  const close = async () => {
    for (const f of forwards) f.close();
    await fabric?.destroy().catch(() => {});
    for (const n of nodes) deleteNamedNetns(n.netns);
    await sim.close();
  };
  try {
    for (const n of nodes) {
      createNamedNetns(n.netns);
      using s = NetlinkSocket.openIn(n.netnsPath);
      setLinkUp(s, "lo");
    }
    fabric = await Fabric.create({ name: `${prefix}-vpc` });
    for (const n of nodes) fabric.addNode({ instanceId: n.instanceId, netns: n.netns });
    fabric.follow(sim);
    await fabric.sync(sim.state);
    // The first node's forwarders pick free ports; the others listen on the same ones.
    let ec2Port = 0;
    let imdsPort = 0;
    for (const n of nodes) {
      const ec2 = forwardIntoNetns(n.netnsPath, sim.ec2Endpoint, ec2Port);
      forwards.push(ec2);
      const imds = forwardIntoNetns(n.netnsPath, sim.imdsEndpointFor(n.instanceId), imdsPort);
      forwards.push(imds);
      ec2Port = Number(new URL(ec2.url).port);
      imdsPort = Number(new URL(imds.url).port);
      const eni = [...sim.state.enis.values()].find((e) =>
        e.attachment?.instanceId === n.instanceId && e.attachment.deviceIndex === 0
      );
      n.ip = eni?.privateIps.find((p) => p.primary)?.address ?? "";
    }
    return {
      sim,
      fabric,
      nodes,
      nodeNetns: nodes[0].netns,
      nodePath: nodes[0].netnsPath,
      nodeIp: nodes[0].ip,
      ec2Url: forwards[0].url,
      imdsUrl: forwards[1].url,
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}

/** The subnet CIDR holding `ip` and the ENI it is on, as the VPC (simulator) sees it. */
export function whereIs(
  sim: SimServer,
  ip: string,
): { subnetCidr: string; eniId: string; instanceId: string } | undefined {
  for (const eni of sim.state.enis.values()) {
    if (!eni.privateIps.some((p) => p.address === ip)) continue;
    const subnet = sim.state.subnets.get(eni.subnetId)!;
    return {
      subnetCidr: formatIpv4Cidr(subnet.cidr),
      eniId: eni.id,
      instanceId: eni.attachment?.instanceId ?? "",
    };
  }
  return undefined;
}
