/**
 * The plugin's own client (cni/ipam_client.ts) against the real daemon: every verb of the
 * protocol round-trips and parses; prefix delegation hands out addresses of a /28 that EC2
 * delegated to the ENI.
 */
import assert from "node:assert/strict";
import { IpamClient } from "../../cni/ipam_client.ts";
import { startSim } from "../../aws/sim/mod.ts";
import { eventually, inCidr, INSTANCE, standardScenario, startStack, tempRoot } from "./harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "./daemon_process.ts";

Deno.test("protocol: the plugin's IpamClient speaks to `vpcni serve` (add, check, gc, status, del)", async () => {
  // The plugin's client blocks its thread while it waits (a plugin process has nothing else
  // to do), so the daemon runs as its own process and the pool is warm before each call.
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const port = randomPort();
  const daemon = spawnDaemon(
    root,
    await writeChildConfig(root, sim, port, {
      pools: [{ name: "default", warmIps: 4, warmEnis: 0 }],
    }),
    port,
  );
  const client = new IpamClient({
    socket: `${root}/ipam.sock`,
    timeoutMs: 10_000,
    addTimeoutMs: 10_000,
  });
  try {
    await daemon.ready();
    assert.ok(
      await eventually(async () => {
        const pools = await (await fetch(`http://127.0.0.1:${port}/v1/pools`)).json();
        return pools[0].free >= 4;
      }, 10_000),
    );
    const key = { network: "vpcni", containerId: "c-plugin", ifName: "eth0" };
    const a = client.add({
      op: "add",
      ...key,
      netns: "/proc/self/ns/net",
      podNamespace: "ns",
      podName: "p",
    });
    const alloc = await a;
    assert.ok(inCidr(alloc.ip, alloc.eni.subnetCidr));
    assert.equal(alloc.eni.routeTable, 100 + alloc.eni.deviceIndex);
    // The ENI's own primary address rides along: the datapath puts it on a secondary ENI's
    // link so ARP from that link carries a sender address the VPC accepts.
    const simEni = sim.state.enis.get(alloc.eni.id)!;
    const simPrimary = simEni.privateIps.find((p) => p.primary)?.address;
    assert.ok(simPrimary, `sim shows no primary address on ${alloc.eni.id}`);
    assert.equal(alloc.eni.primaryIp, simPrimary);
    assert.notEqual(alloc.ip, alloc.eni.primaryIp);
    const c = await client.check({ op: "check", ...key });
    assert.equal(c.ip, alloc.ip);
    const st = await client.status({ op: "status" });
    assert.equal(st.pool, "default");
    const gc = await client.gc({
      op: "gc",
      network: "vpcni",
      validAttachments: [{ containerId: "c-plugin", ifName: "eth0" }],
    });
    assert.deepEqual(gc, []);
    const d = await client.del({ op: "del", ...key });
    assert.equal(d.length, 1);
    assert.equal(d[0].ip, alloc.ip);
  } finally {
    client.close();
    await daemon.stop();
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("protocol: prefix delegation hands out addresses of a delegated /28", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [{ name: "default", prefixDelegation: true, warmEnis: 0, warmIps: 4 }],
  });
  try {
    const r = await stack.call({
      op: "add",
      network: "vpcni",
      containerId: "c-pd",
      ifName: "eth0",
      netns: "/proc/self/ns/net",
    });
    assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
    const eni = stack.sim.state.enis.get(r.allocation.eni.id)!;
    const prefixes = eni.prefixes.map((p) => p.cidr);
    assert.equal(r.allocation.eni.primaryIp, eni.privateIps.find((p) => p.primary)?.address);
    assert.ok(prefixes.length >= 1, "EC2 delegated a prefix");
    assert.ok(
      prefixes.some((p) => inCidr(r.allocation.ip, p)),
      `${r.allocation.ip} in ${prefixes}`,
    );
  } finally {
    await stack.close();
  }
});

Deno.test("protocol: a second ADD is refused (106), `stale` lists without releasing, answers carry the node's ENI MACs", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [{ name: "default", warmIps: 2, warmEnis: 0 }],
  });
  try {
    const add = (id: string) =>
      stack.call({
        op: "add",
        network: "vpcni",
        containerId: id,
        ifName: "eth0",
        netns: `/run/netns/${id}`,
      });
    // Two ADDs of one attachment at once: one is served, the other refused.
    const [first, racing] = await Promise.all([add("c-live"), add("c-live")]);
    const [won, lost] = first.ok ? [first, racing] : [racing, first];
    assert.ok(won.ok && "allocation" in won, JSON.stringify(won));
    assert.equal(!lost.ok && lost.code, 106, JSON.stringify(lost));
    const ip = won.allocation.ip;
    const again = await add("c-live");
    assert.ok(!again.ok && again.code === 106, JSON.stringify(again));
    assert.match(again.msg, new RegExp(`already holds ${ip.replaceAll(".", "\\.")}`));
    const check = await stack.call({
      op: "check",
      network: "vpcni",
      containerId: "c-live",
      ifName: "eth0",
    });
    assert.ok(check.ok && "allocation" in check && check.allocation.ip === ip, "address kept");

    // Every ENI attached to the instance, the primary included, is named by its MAC.
    const macs = [...stack.sim.state.enis.values()]
      .filter((e) => e.attachment?.instanceId === INSTANCE).map((e) => e.mac.toLowerCase());
    assert.ok(macs.length >= 1);
    for (const mac of macs) assert.ok(won.allocation.nodeEniMacs?.includes(mac), mac);

    const other = await add("c-gone");
    assert.ok(other.ok && "allocation" in other);
    const stale = await stack.call({
      op: "stale",
      network: "vpcni",
      validAttachments: [{ containerId: "c-live", ifName: "eth0" }],
    });
    assert.ok(stale.ok && "stale" in stale, JSON.stringify(stale));
    assert.deepEqual(stale.stale.map((a) => a.containerId), ["c-gone"]);
    const still = await stack.call({
      op: "check",
      network: "vpcni",
      containerId: "c-gone",
      ifName: "eth0",
    });
    assert.ok(still.ok, "stale released nothing");
  } finally {
    await stack.close();
  }
});
