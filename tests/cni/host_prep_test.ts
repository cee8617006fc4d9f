/**
 * The daemon sets an ENI's host side up once, when the ENI is attached (and at start for
 * those attached already), before any pod asks: the link up, the ENI's own address, its
 * route table T(E). Against the simulator with the real daemon in this process; the node's
 * ENIs are veths with the ENIs' MACs in a test netns, where the daemon's CNI worker acts.
 */
import assert from "node:assert/strict";
import { ipJson, sh } from "../helpers/sh.ts";
import { eventually, INSTANCE, standardScenario, startStack } from "../ipam/harness.ts";
import { makeNode } from "./harness.ts";

Deno.test("the daemon prepares each attached ENI's host side before any ADD", async () => {
  const stack = await startStack(standardScenario(), {
    datapath: "veth",
    pools: [{ name: "default", warmIps: 2, warmEnis: 0, firstInterfaceIndex: 1 }],
  });
  const node = await makeNode();
  try {
    const secondary = () =>
      [...stack.sim.state.enis.values()].filter((e) =>
        e.attachment?.instanceId === INSTANCE && e.attachment.deviceIndex > 0
      );
    assert.ok(
      await eventually(() => secondary().length > 0, 20_000),
      "the warm pool attached a secondary ENI",
    );
    const links: { name: string; eni: ReturnType<typeof secondary>[number] }[] = [];
    for (const [i, e] of secondary().entries()) {
      // Down, with no address and no table: as a hot-plugged ENI arrives.
      await sh(
        ["ip", "link", "add", `eni${i}`, "address", e.mac.toLowerCase(), "type", "veth"]
          .concat(["peer", "name", `eni${i}p`]),
        { netns: node.node.name },
      );
      links.push({ name: `eni${i}`, eni: e });
    }
    stack.daemon.cni!.useNetns(node.node.path);
    for (const { name, eni } of links) {
      const own = eni.privateIps.find((p) => p.primary)!.address;
      const table = String(100 + eni.attachment!.deviceIndex);
      const ready = await eventually(async () => {
        const [link] = await ipJson<{ flags: string[] }[]>(["link", "show", name], node.node.name);
        const addrs = await ipJson<{ addr_info: { local: string }[] }[]>(
          ["-4", "addr", "show", name],
          node.node.name,
        );
        // Until the table has a route, `ip` says it does not exist.
        const routes = await ipJson<{ dst: string; gateway?: string }[]>(
          ["-4", "route", "show", "table", table],
          node.node.name,
        ).catch(() => []);
        return link.flags.includes("UP") &&
          addrs.flatMap((a) => a.addr_info.map((x) => x.local)).includes(own) &&
          routes.some((r) => r.dst === "default");
      }, 20_000);
      assert.ok(ready, `${eni.id}: link ${name} up, ${own} on it, table ${table}`);
    }
  } finally {
    await node.cleanup();
    await stack.close();
  }
});
