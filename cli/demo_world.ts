/**
 * The world `vpcni demo` runs in: one VPC on the embedded simulator, with a node subnet
 * and two pod subnets tagged the way a multi-zone network tags them (`zone=public`,
 * `zone=internal`), one node, and the daemon configuration with a pool per zone.
 *
 * @module
 */
import type { ScenarioInput } from "../aws/sim/mod.ts";

/** The demo node's instance id. */
export const DEMO_INSTANCE = "i-0de0000000000001";

/** The demo cluster (tagged on every ENI the daemon creates). */
export const DEMO_CLUSTER = "demo";

/** The demo VPC: a /16 with a node subnet and one pod subnet per zone. */
export function demoScenario(instanceType: string): ScenarioInput {
  return {
    region: "us-east-1",
    vpc: { id: "vpc-0de00001", cidrs: ["10.42.0.0/16"] },
    subnets: [
      { id: "subnet-0de00001", cidr: "10.42.0.0/24", az: "us-east-1a", tags: { zone: "nodes" } },
      { id: "subnet-0de00002", cidr: "10.42.16.0/20", az: "us-east-1a", tags: { zone: "public" } },
      {
        id: "subnet-0de00003",
        cidr: "10.42.32.0/20",
        az: "us-east-1a",
        tags: { zone: "internal" },
      },
      // Same tags, other AZ: the daemon must not pick it for a node in us-east-1a.
      {
        id: "subnet-0de00004",
        cidr: "10.42.48.0/20",
        az: "us-east-1b",
        tags: { zone: "internal" },
      },
    ],
    securityGroups: [
      { id: "sg-0de00001", name: "nodes", tags: { role: "nodes" } },
      { id: "sg-0de00002", name: "public-pods", tags: { role: "public-pods" } },
    ],
    instances: [{
      id: DEMO_INSTANCE,
      type: instanceType,
      subnet: "subnet-0de00001",
      securityGroups: ["sg-0de00001"],
      az: "us-east-1a",
    }],
  };
}

/** Endpoints and paths the daemon configuration points at. */
export interface DemoDaemonPaths {
  ec2Endpoint: string;
  imdsEndpoint: string;
  socketPath: string;
  stateDir: string;
  listen: string;
  datapath: string;
}

/**
 * A kubelet of the node's own, which tests start beside the node (never the host's): where
 * its device-plugin directory and pod-resources socket are.
 */
export interface DemoKubelet {
  devicePluginDir: string;
  podResourcesSocket: string;
}

/**
 * The environment the demo's daemon runs with, over the user's own. The demo's node is no
 * kubelet node: the device plugin is off even where the user's environment turns it on
 * (the environment would win over the file), so the daemon never talks to, nor registers
 * devices with, a kubelet of the host. A test that starts a kubelet for the node names it.
 */
export function demoDaemonEnv(kubelet?: DemoKubelet): Record<string, string> {
  return {
    AWS_ACCESS_KEY_ID: "demo",
    AWS_SECRET_ACCESS_KEY: "demo",
    AWS_REGION: "us-east-1",
    ...(kubelet
      ? {
        VPCNI_DEVICE_PLUGIN: "auto",
        VPCNI_DEVICE_PLUGIN_DIR: kubelet.devicePluginDir,
        VPCNI_POD_RESOURCES_SOCKET: kubelet.podResourcesSocket,
      }
      : { VPCNI_DEVICE_PLUGIN: "off" }),
  };
}

/**
 * The daemon configuration: pool `internal` (default) and pool `public`; no device plugin
 * (see {@linkcode demoDaemonEnv}).
 */
export function demoDaemonConfig(p: DemoDaemonPaths): Record<string, unknown> {
  return {
    clusterName: DEMO_CLUSTER,
    devicePlugin: "off",
    datapath: p.datapath,
    socketPath: p.socketPath,
    stateDir: p.stateDir,
    listen: p.listen,
    region: "us-east-1",
    ec2Endpoint: p.ec2Endpoint,
    imdsEndpoint: p.imdsEndpoint,
    defaultPool: "internal",
    pools: [
      { name: "internal", subnets: { tags: "zone=internal" }, warmIps: 4, warmEnis: 0 },
      {
        name: "public",
        subnets: { tags: "zone in (public)" },
        securityGroups: { tags: "role=public-pods" },
        warmIps: 2,
        warmEnis: 0,
      },
    ],
  };
}
