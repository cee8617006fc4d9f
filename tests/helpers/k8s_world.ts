/**
 * The VPC the lane's node lives in: the EC2 + IMDS simulator with subnets and security
 * groups tagged the way examples/kubernetes/vpcni-daemonset.yaml selects them, its fabric,
 * and the node's network namespace holding the node's ENIs, with the simulator's EC2 and
 * IMDS endpoints reachable on the node's loopback (as a real node reaches its regional
 * endpoint and 169.254.169.254).
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

/** The lane node's instance id. */
export const LANE_INSTANCE = "i-0c8500000000001";

/** Subnet of the example's `public` pool: a /28, so the pool runs out after a few pods. */
export const PUBLIC_SUBNET = "10.43.16.0/28";

/** Subnet of the example's `internal` pool in the node's AZ. */
export const INTERNAL_SUBNET = "10.43.32.0/20";

/** The scenario: tags match the example's pool selectors. */
export function laneScenario(): ScenarioInput {
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
    instances: [{
      id: LANE_INSTANCE,
      type: "m5.xlarge",
      subnet: "subnet-0c850001",
      securityGroups: ["sg-0c850001"],
      az: "us-east-1a",
    }],
  };
}

/** The running VPC and node netns. */
export interface LaneWorld {
  sim: SimServer;
  fabric: Fabric;
  /** Name of the node netns (under /run/netns). */
  nodeNetns: string;
  nodePath: string;
  /** The node's primary address. */
  nodeIp: string;
  /** EC2 endpoint as seen from inside the node. */
  ec2Url: string;
  /** IMDS endpoint as seen from inside the node. */
  imdsUrl: string;
  close(): Promise<void>;
}

/** Starts the simulator, the fabric and the node netns `<prefix>-node`. */
export async function startWorld(prefix: string): Promise<LaneWorld> {
  const sim = await startSim({ scenario: laneScenario() });
  const nodeNetns = `${prefix}-node`;
  const nodePath = `/run/netns/${nodeNetns}`;
  let fabric: Fabric | undefined;
  const forwards: NetnsForward[] = [];
  const close = async () => {
    for (const f of forwards) f.close();
    await fabric?.destroy().catch(() => {});
    deleteNamedNetns(nodeNetns);
    await sim.close();
  };
  try {
    createNamedNetns(nodeNetns);
    {
      using s = NetlinkSocket.openIn(nodePath);
      setLinkUp(s, "lo");
    }
    fabric = await Fabric.create({ name: `${prefix}-vpc` });
    fabric.addNode({ instanceId: LANE_INSTANCE, netns: nodeNetns });
    fabric.follow(sim);
    await fabric.sync(sim.state);
    forwards.push(forwardIntoNetns(nodePath, sim.ec2Endpoint));
    forwards.push(forwardIntoNetns(nodePath, sim.imdsEndpointFor(LANE_INSTANCE)));
    const eni = [...sim.state.enis.values()].find((e) =>
      e.attachment?.instanceId === LANE_INSTANCE && e.attachment.deviceIndex === 0
    );
    const nodeIp = eni?.privateIps.find((p) => p.primary)?.address ?? "";
    return {
      sim,
      fabric,
      nodeNetns,
      nodePath,
      nodeIp,
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
