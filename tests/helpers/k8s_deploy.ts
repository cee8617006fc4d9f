/**
 * Deploys vpcni on a lane cluster the way a user does: the example DaemonSet with the edits
 * its header documents (the simulator's endpoints, `veth` where the kernel has no ipvlan),
 * the optional credentials Secret, `kubectl apply`, and a wait for one daemon pod per node.
 *
 * @module
 */
import type { LaneCluster } from "./k8s_cluster.ts";
import { editedExample, EXAMPLE_DAEMONSET } from "./k8s_workloads.ts";
import { type PodJson, readyPods } from "./k8s_inspect.ts";
import { kernelHasIpvlan } from "../../cli/demo_node.ts";

/** What the deploy applied and the daemon pods that came Ready. */
export interface VpcniDeployment {
  /** The edited example, as applied. */
  example: string;
  /** The daemon pods, one per node. */
  daemons: PodJson[];
}

/** Applies the edited example DaemonSet on `c` and waits for its pod on every node. */
export async function deployVpcni(c: LaneCluster, tag: string): Promise<VpcniDeployment> {
  const example = editedExample(await Deno.readTextFile(EXAMPLE_DAEMONSET), {
    ec2Endpoint: c.world.ec2Url,
    imdsEndpoint: c.world.imdsUrl,
    datapath: kernelHasIpvlan(tag) ? undefined : "veth",
  });
  // The simulator has no instance profile to hand out: keys in the optional Secret the
  // example's daemon reads (its header says so).
  await c.kubectlOk([
    "-n",
    "kube-system",
    "create",
    "secret",
    "generic",
    "vpcni-aws-credentials",
    "--from-literal=AWS_ACCESS_KEY_ID=lane",
    "--from-literal=AWS_SECRET_ACCESS_KEY=lane",
  ]);
  await c.kubectlOk(["apply", "-f", "-"], example);
  const daemons = await readyPods(
    c,
    "app.kubernetes.io/name=vpcni",
    c.nodes.length,
    180_000,
    "kube-system",
  );
  return { example, daemons };
}
