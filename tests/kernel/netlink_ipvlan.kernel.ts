/**
 * ipvlan through netlink/: l2 and l3s slaves of a veth "ENI", created directly inside two pod
 * netns, addressed and routed through netlink/, then traffic pod↔pod and pod→an address
 * behind the ENI (in a "fabric" netns on the veth's other end), then deleted.
 *
 * Needs a kernel with ipvlan: run it in the kernel lane (`deno task test:kernel`), or alone
 * as root with `deno test -A --no-check tests/kernel/netlink_ipvlan.kernel.ts`. `ip` and
 * `ping` are used only to set up the fabric and to make traffic.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  addAddress,
  addRoute,
  createIpvlan,
  createVeth,
  deleteLink,
  findLink,
  getLink,
  InvalidError,
  type IpvlanMode,
  listLinks,
  listRoutes,
  NetlinkSocket,
  renameLink,
  setLinkUp,
} from "../../netlink/mod.ts";
import { isRoot, type TestNetns, withNetns } from "../helpers/netns.ts";
import { ipJson, run, sh } from "../helpers/sh.ts";

const SUBNET_GW = "10.77.0.1"; // the fabric's end of the ENI wire
const NODE_IP = "10.77.0.2";
const BEHIND_ENI = "10.88.0.1"; // an address only the fabric holds

interface IpLinkDetail {
  ifindex: number;
  ifname: string;
  link_index?: number;
  link_netnsid?: number;
  linkinfo?: { info_kind?: string; info_data?: { mode?: string; flags?: string } };
}

async function ping(from: TestNetns, to: string): Promise<void> {
  const r = await run(["ping", "-c", "2", "-i", "0.2", "-W", "2", to], { netns: from.name });
  assert.equal(r.code, 0, `ping ${to} from ${from.name} failed:\n${r.stdout}${r.stderr}`);
}

/** createIpvlan, with a clear failure on a kernel that has no ipvlan. */
function createSlave(s: NetlinkSocket, o: Parameters<typeof createIpvlan>[1]): void {
  try {
    createIpvlan(s, o);
  } catch (e) {
    if (e instanceof InvalidError && e.errno === 95) {
      throw new Error(
        `this kernel has no ipvlan (${e.message}): run through 'deno task test:kernel'`,
      );
    }
    throw e;
  }
}

for (const mode of ["l2", "l3s"] as IpvlanMode[]) {
  Deno.test(`netlink/: ipvlan ${mode} slaves in two pod netns talk to each other and past the ENI`, async () => {
    assert.ok(isRoot(), "this test needs root");
    await withNetns(["vnlkn", "vnlkf", "vnlka", "vnlkb"], async (node, fabric, podA, podB) => {
      using nodeSock = NetlinkSocket.openIn(node.path);
      using fabSock = NetlinkSocket.openIn(fabric.path);

      // The ENI: a veth whose far end is the VPC fabric, holding the gateway and an address
      // behind it.
      createVeth(nodeSock, { name: "vnleni1", peerName: "vnlfab1", peerNetns: fabric.path });
      setLinkUp(nodeSock, "vnleni1");
      addAddress(nodeSock, "vnleni1", `${NODE_IP}/24`);
      setLinkUp(fabSock, "vnlfab1");
      setLinkUp(fabSock, "lo");
      addAddress(fabSock, "vnlfab1", `${SUBNET_GW}/24`);
      addAddress(fabSock, "lo", `${BEHIND_ENI}/32`);
      // l3/l3s slaves route their egress through the master's netns.
      addRoute(nodeSock, { dst: `${BEHIND_ENI}/32`, gateway: SUBNET_GW, dev: "vnleni1" });
      const eni = getLink(nodeSock, "vnleni1");

      const pods = [{ ns: podA, ip: "10.77.0.11" }, { ns: podB, ip: "10.77.0.12" }];
      for (const [i, pod] of pods.entries()) {
        // Created directly inside the pod netns, under a temporary name, then renamed as the
        // CNI plugin renames to CNI_IFNAME.
        createSlave(nodeSock, {
          name: `vnlipv${i}`,
          parent: "vnleni1",
          mode,
          flag: "bridge",
          netns: pod.ns.path,
        });
        assert.equal(findLink(nodeSock, `vnlipv${i}`), undefined, "not created in the node netns");
        using s = NetlinkSocket.openIn(pod.ns.path);
        renameLink(s, `vnlipv${i}`, "eth0");
        const slave = getLink(s, "eth0");
        assert.equal(slave.kind, "ipvlan");
        assert.equal(slave.ipvlanMode, mode);
        assert.equal(slave.ipvlanFlag, "bridge");
        assert.equal(slave.parentIndex, eni.index);
        assert.equal(typeof slave.linkNetnsId, "number", "the parent lives in another netns");
        assert.equal(slave.mac, eni.mac, "ipvlan slaves share the master's MAC");

        // iproute2 sees the same link.
        const ip = (await ipJson<IpLinkDetail[]>(["-d", "link", "show", "eth0"], pod.ns.name))[0];
        assert.equal(ip.ifindex, slave.index);
        assert.equal(ip.linkinfo?.info_kind, "ipvlan");
        assert.equal(ip.linkinfo?.info_data?.mode, mode);
        assert.equal(ip.link_index, slave.parentIndex);
        assert.equal(ip.link_netnsid, slave.linkNetnsId);

        setLinkUp(s, "lo");
        setLinkUp(s, "eth0");
        if (mode === "l2") {
          addAddress(s, "eth0", `${pod.ip}/24`);
          addRoute(s, { dst: "default", gateway: SUBNET_GW, dev: "eth0" });
        } else {
          // l3s: no ARP on the slave; a /32 and a device route.
          addAddress(s, "eth0", `${pod.ip}/32`);
          addRoute(s, { dst: "default", dev: "eth0", scope: "link" });
          // The fabric cannot ARP for an l3s slave, so it learns the pod's MAC as a VPC would.
          await sh(
            [
              "ip",
              "neigh",
              "replace",
              pod.ip,
              "lladdr",
              eni.mac,
              "dev",
              "vnlfab1",
              "nud",
              "permanent",
            ],
            { netns: fabric.name },
          );
        }
        assert.ok(listRoutes(s, { family: 4 }).some((r) => r.dst === "default"));
      }

      await ping(podA, pods[1].ip);
      await ping(podB, pods[0].ip);
      await ping(podA, BEHIND_ENI);
      await ping(podB, BEHIND_ENI);

      for (const pod of pods) {
        using s = NetlinkSocket.openIn(pod.ns.path);
        deleteLink(s, "eth0");
        assert.deepEqual(listLinks(s).map((l) => l.name), ["lo"]);
      }
      assert.equal(getLink(nodeSock, "vnleni1").index, eni.index, "the ENI outlives its slaves");
    });
  });
}

Deno.test("netlink/: every ipvlan mode and flag round-trips through the kernel and ip -d -j", async () => {
  assert.ok(isRoot(), "this test needs root");
  await withNetns(["vnlkn", "vnlka"], async (node, pod) => {
    using nodeSock = NetlinkSocket.openIn(node.path);
    using podSock = NetlinkSocket.openIn(pod.path);
    createVeth(nodeSock, { name: "vnleni2", peerName: "vnlwire2", mtu: 9001 });
    const eni = getLink(nodeSock, "vnleni2");
    for (const mode of ["l2", "l3", "l3s"] as IpvlanMode[]) {
      for (const flag of ["bridge", "private", "vepa"] as const) {
        createSlave(nodeSock, {
          name: "vnlipv",
          parent: eni.index,
          mode,
          flag,
          netns: pod.path,
          mtu: 1500,
        });
        const slave = getLink(podSock, "vnlipv");
        assert.deepEqual(
          [slave.kind, slave.ipvlanMode, slave.ipvlanFlag, slave.mtu, slave.parentIndex],
          ["ipvlan", mode, flag, 1500, eni.index],
          `${mode} ${flag}`,
        );
        const ip = (await ipJson<IpLinkDetail[]>(["-d", "link", "show", "vnlipv"], pod.name))[0];
        assert.equal(ip.linkinfo?.info_data?.mode, mode, `${mode} ${flag}: ip's mode`);
        deleteLink(podSock, "vnlipv");
        assert.equal(findLink(podSock, "vnlipv"), undefined);
      }
    }
  });
});
