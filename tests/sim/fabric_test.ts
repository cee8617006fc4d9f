/**
 * The fabric in real network namespaces: two nodes joined by a VPC netns that routes each IP
 * to the ENI owning it and drops frames whose source IP or MAC the ENI does not own, kept in
 * step with the simulator as IPs are assigned and ENIs attached. Needs root.
 */
import assert from "node:assert/strict";
import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DetachNetworkInterfaceCommand,
  UnassignPrivateIpAddressesCommand,
} from "@aws-sdk/client-ec2";
import { startSim } from "../../aws/sim/mod.ts";
import { Fabric } from "../../aws/sim/fabric.ts";
import { createNetns, deleteNetns, isRoot, uniqueName } from "../helpers/netns.ts";
import { ipJson, run, sh } from "../helpers/sh.ts";
import { IDS, sdkClient, smallScenario } from "./sim_helpers.ts";

interface Link {
  ifname: string;
  address: string;
  operstate: string;
  addr_info?: { local: string; prefixlen: number }[];
}

/** True when `src` in `netns` reaches `dst` (a few tries, so a first ARP exchange can settle). */
async function reaches(netns: string, src: string, dst: string, tries = 3): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    const r = await run(["ping", "-n", "-q", "-c", "1", "-W", "1", "-I", src, dst], { netns });
    if (r.code === 0) return true;
  }
  return false;
}

Deno.test("fabric: owned sources pass, unowned IP or MAC is dropped, and it follows the sim", async () => {
  if (!isRoot()) {
    throw new Error("this test needs root: it creates network namespaces and nft tables");
  }
  const sim = await startSim({ scenario: smallScenario() });
  const ec2 = sdkClient(sim);
  const nodeA = uniqueName("vfb");
  const nodeB = uniqueName("vfb");
  let fabric: Fabric | undefined;
  try {
    await createNetns(nodeA);
    await createNetns(nodeB);
    fabric = await Fabric.create({ name: uniqueName("vfb") });
    fabric.addNode({ instanceId: IDS.node, netns: nodeA });
    fabric.addNode({ instanceId: IDS.tinyNode, netns: nodeB });
    fabric.follow(sim);
    await fabric.idle();

    const enisA = sim.state.enisOf(IDS.node);
    const ipA = enisA[0].privateIps[0].address;
    const ipB = sim.state.enisOf(IDS.tinyNode)[0].privateIps[0].address;
    const [eth0] = await ipJson<Link[]>(["link", "show", "dev", "eth0"], nodeA);
    assert.equal(eth0.address, enisA[0].mac, "eth0 carries the ENI's MAC");
    const [eth0v4] = await ipJson<Link[]>(["-4", "addr", "show", "dev", "eth0"], nodeA);
    assert.deepEqual(eth0v4.addr_info!.map((a) => `${a.local}/${a.prefixlen}`), [`${ipA}/24`]);

    assert.ok(await reaches(nodeA, ipA, "10.0.0.1"), "the subnet gateway answers");
    assert.ok(await reaches(nodeA, ipA, ipB), "node A reaches node B");

    // A secondary IP the sim assigned passes; one it did not is dropped.
    const assigned = await ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: enisA[0].id,
        SecondaryPrivateIpAddressCount: 1,
      }),
    );
    const owned = assigned.AssignedPrivateIpAddresses![0].PrivateIpAddress!;
    await fabric.idle();
    const unowned = "10.0.0.99";
    await sh(["ip", "addr", "add", `${owned}/32`, "dev", "eth0"], { netns: nodeA });
    await sh(["ip", "addr", "add", `${unowned}/32`, "dev", "eth0"], { netns: nodeA });
    assert.ok(await reaches(nodeA, owned, ipB), "an owned secondary IP passes");
    assert.equal(await reaches(nodeA, unowned, ipB, 1), false, "an unowned source IP is dropped");

    // The same address passes once the sim gives it to the ENI: the drop was the fabric's.
    await ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: enisA[0].id,
        PrivateIpAddresses: [unowned],
      }),
    );
    await fabric.idle();
    assert.ok(await reaches(nodeA, unowned, ipB), "passes after AssignPrivateIpAddresses");
    await ec2.send(
      new UnassignPrivateIpAddressesCommand({
        NetworkInterfaceId: enisA[0].id,
        PrivateIpAddresses: [unowned],
      }),
    );
    await fabric.idle();
    assert.equal(await reaches(nodeA, unowned, ipB, 1), false, "dropped again after unassign");

    // An address inside a delegated /28 prefix is owned too, and routed as the /28.
    const px = await ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: enisA[0].id, Ipv4PrefixCount: 1 }),
    );
    const prefix = px.AssignedIpv4Prefixes![0].Ipv4Prefix!;
    await fabric.idle();
    const [net] = prefix.split("/");
    const inPrefix = net.replace(/\.(\d+)$/, (_, last) => `.${Number(last) + 5}`);
    await sh(["ip", "addr", "add", `${inPrefix}/32`, "dev", "eth0"], { netns: nodeA });
    assert.ok(await reaches(nodeA, inPrefix, ipB), "an address of a delegated prefix passes");
    assert.match(await sh(["ip", "route", "show", prefix], { netns: fabric.netns }), /dev f\d+/);

    // A frame from a MAC the ENI does not own is dropped.
    await sh(["ip", "link", "set", "eth0", "address", "02:00:00:00:be:ef"], { netns: nodeA });
    assert.equal(await reaches(nodeA, ipA, ipB, 1), false, "an unowned source MAC is dropped");
    await sh(["ip", "link", "set", "eth0", "address", enisA[0].mac], { netns: nodeA });
    assert.ok(await reaches(nodeA, ipA, ipB), "the ENI's own MAC passes again");

    // Attach shows up as ethN with the ENI's MAC, down and unnumbered; detach removes it.
    const eni =
      (await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: IDS.internalSubnet })))
        .NetworkInterface!;
    const att = await ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: eni.NetworkInterfaceId,
        InstanceId: IDS.node,
        DeviceIndex: 1,
      }),
    );
    await fabric.idle();
    const [eth1] = await ipJson<Link[]>(["link", "show", "dev", "eth1"], nodeA);
    assert.equal(eth1.address, eni.MacAddress);
    assert.equal(eth1.operstate, "DOWN");
    const eth1v4 = await ipJson<Link[]>(["-4", "addr", "show", "dev", "eth1"], nodeA);
    assert.deepEqual(eth1v4.flatMap((l) => l.addr_info ?? []), []);
    const routes = await sh(["ip", "route", "show", `${eni.PrivateIpAddress}/32`], {
      netns: fabric.netns,
    });
    assert.match(routes, new RegExp(`dev ${fabric.fabricInterfaceOf(eni.NetworkInterfaceId!)}`));

    // A secondary ENI configured by hand (as the datapath would) reaches node B over the VPC.
    await sh(["ip", "addr", "add", `${eni.PrivateIpAddress}/20`, "dev", "eth1"], { netns: nodeA });
    await sh(["ip", "link", "set", "eth1", "up"], { netns: nodeA });
    await sh([
      "ip",
      "route",
      "add",
      `${ipB}/32`,
      "via",
      "10.0.16.1",
      "dev",
      "eth1",
      "src",
      eni.PrivateIpAddress!,
    ], { netns: nodeA });
    assert.ok(
      await reaches(nodeA, eni.PrivateIpAddress!, ipB),
      "traffic leaves through the secondary ENI",
    );

    await ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: att.AttachmentId }));
    await fabric.idle();
    const links = await ipJson<Link[]>(["link", "show"], nodeA);
    assert.deepEqual(links.map((l) => l.ifname).sort(), ["eth0", "lo"]);
  } finally {
    ec2.destroy();
    await fabric?.destroy();
    await deleteNetns(nodeA);
    await deleteNetns(nodeB);
    await sim.close();
  }
});
