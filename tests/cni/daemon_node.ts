/**
 * The real IPAM daemon on the simulator, running in the test's process, serving a test node
 * (tests/cni/harness.ts): the pods' node is a netns of the test's, and the daemon wires pods
 * from there.
 *
 * @module
 */
import { type Stack, standardScenario, startStack } from "../ipam/harness.ts";
import { makeNode, type TestNode } from "./harness.ts";

/**
 * Starts the daemon with `pools`, lets `prepare` set the stage (simulator faults, ENI links)
 * before pods come, runs `fn`, then removes the node and stops the daemon whatever happened.
 */
export async function withDaemonNode(
  pools: Record<string, unknown>[],
  fn: (node: TestNode, stack: Stack) => Promise<void>,
  prepare: (node: TestNode, stack: Stack) => Promise<void> = async () => {},
): Promise<void> {
  const stack = await startStack(standardScenario(), { pools });
  try {
    const node = await makeNode();
    try {
      await prepare(node, stack);
      stack.daemon.cni!.useNetns(node.node.path);
      await fn(node, stack);
    } finally {
      await node.cleanup();
    }
  } finally {
    await stack.close();
  }
}
