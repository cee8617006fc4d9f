/**
 * The veth datapath over the simulator's own fabric (aws/sim/fabric.ts); the ipvlan
 * datapaths run the same cases in tests/kernel/datapath_ipvlan.kernel.ts.
 */
import assert from "node:assert/strict";
import { isRoot } from "../helpers/netns.ts";
import { simFabricFailures } from "../helpers/datapath_simfabric.ts";

Deno.test("veth over the simulator's fabric: pod→pod across nodes on secondary ENIs, pod→node, node→pod, DEL", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  assert.deepEqual(await simFabricFailures("veth"), []);
});
