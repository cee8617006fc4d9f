/**
 * The simulated node for the container-runtime tests: `vpcni demo`'s node (the EC2 + IMDS
 * simulator, its VPC fabric, a node netns holding the node's ENIs, the daemon inside it,
 * the plugin and conflist put in place by `vpcni install`) with this suite's names, a
 * cniVersion containerd 1.6 accepts, and the checks the suite needs on top. A runtime
 * started inside the same netns (see runtime_containerd.ts) then finds the plugin exactly as
 * it would on a real node.
 *
 * @module
 */
import { DemoNode } from "../../cli/demo_node.ts";
import type { DemoKubelet } from "../../cli/demo_world.ts";
import { type Checkpoint, readCheckpoint } from "../../ipam/checkpoint.ts";

/** The CNI network name the conflist declares. */
export const RUNTIME_NETWORK = "vpcni";

/** Host-side link prefix of the pods: every host-side pod link starts with it. */
export const RUNTIME_HOST_VETH_PREFIX = "vrt";

/** The node as the runtime tests use it. */
export type RuntimeNode = DemoNode;

/**
 * Starts the node (`<prefix>-node`, `<prefix>-vpc`) and its daemon, with the conflist at
 * cniVersion 1.0.0 (containerd 1.6's libcni knows results up to 1.0.0); throws with the
 * daemon's log when it does not become ready. With `o.kubelet`, the daemon's device plugin is
 * `auto` at that kubelet's paths (off otherwise); with `o.ownMountNamespace`, the daemon runs
 * in a private mount namespace of its own, as in its DaemonSet container.
 */
export async function startRuntimeNode(
  prefix: string,
  o: { kubelet?: DemoKubelet; ownMountNamespace?: boolean } = {},
): Promise<RuntimeNode> {
  const node = await DemoNode.start({
    datapath: "veth",
    instanceType: "m5.large",
    prefix,
    cniVersion: "1.0.0",
    hostVethPrefix: RUNTIME_HOST_VETH_PREFIX,
    kubelet: o.kubelet,
  });
  try {
    await node.startDaemon({ ownMountNamespace: o.ownMountNamespace });
    if (!(await node.waitReady(90_000))) {
      const log = await Deno.readTextFile(node.daemonLog).catch(() => "");
      throw new Error(`the vpcni daemon did not become ready; its log:\n${log.slice(-3000)}`);
    }
    return node;
  } catch (e) {
    await node.close();
    throw e;
  }
}

/** The daemon's checkpoint as it is on disk now. */
export async function nodeCheckpoint(node: RuntimeNode): Promise<Checkpoint> {
  const c = await readCheckpoint(node.stateDir);
  if (!c) throw new Error(`no checkpoint in ${node.stateDir}`);
  return c;
}
