/**
 * Egress beyond the VPC on the veth datapath, over the simulator's fabric and its internet
 * gateway; the ipvlan datapaths run the same cases in tests/kernel/egress_ipvlan.kernel.ts.
 */
import assert from "node:assert/strict";
import { isRoot } from "../helpers/netns.ts";
import { egressFailures } from "../helpers/egress_world.ts";

Deno.test("veth egress: no SNAT is dropped at the internet gateway; SNAT reaches it as the node; an excluded CIDR sees the pod; replies leave by the ENI a connection came in on", async () => {
  assert.ok(isRoot(), "needs root (network namespaces)");
  assert.deepEqual(await egressFailures("veth", true), []);
});
