import assert from "node:assert/strict";
import {
  createVeth,
  deleteLink,
  ExistsError,
  findLink,
  findLinkByMac,
  getLink,
  type Link,
  listLinks,
  moveLinkToNetns,
  NotFoundError,
  renameLink,
  setLinkDown,
  setLinkMac,
  setLinkMtu,
  setLinkUp,
} from "../../netlink/mod.ts";
import { type IpLink, ipLinks, withSockets } from "./fixture.ts";

/** Our view of a link, in the shape iproute2 reports it. */
function asIp(l: Link, all: Link[]) {
  const sameNsPeer = l.parentIndex !== undefined && l.linkNetnsId === undefined;
  return {
    ifindex: l.index,
    ifname: l.name,
    mtu: l.mtu,
    address: l.mac,
    up: l.up,
    operstate: l.operState,
    kind: l.kind,
    link: sameNsPeer ? all.find((x) => x.index === l.parentIndex)?.name : undefined,
    link_index: sameNsPeer ? undefined : l.parentIndex,
    link_netnsid: l.linkNetnsId,
  };
}

function ipView(j: IpLink) {
  return {
    ifindex: j.ifindex,
    ifname: j.ifname,
    mtu: j.mtu,
    address: j.address,
    up: j.flags.includes("UP"),
    operstate: j.operstate,
    kind: j.linkinfo?.info_kind,
    link: j.link,
    link_index: j.link_index,
    link_netnsid: j.link_netnsid,
  };
}

async function assertSameAsIp(ns: { name: string; sock: Parameters<typeof listLinks>[0] }) {
  const read = async () => {
    const ours = listLinks(ns.sock);
    const theirs = await ipLinks({ name: ns.name, path: "" });
    return [
      ours.map((l) => asIp(l, ours)).sort((a, b) => a.ifindex - b.ifindex),
      theirs.map(ipView).sort((a, b) => a.ifindex - b.ifindex),
    ];
  };
  // The kernel settles a link's operstate asynchronously (linkwatch) after it comes up, so
  // two reads taken a moment apart may differ in it; read again until it has settled.
  let [ours, theirs] = await read();
  for (let i = 0; i < 20 && JSON.stringify(ours) !== JSON.stringify(theirs); i++) {
    await new Promise((r) => setTimeout(r, 100));
    [ours, theirs] = await read();
  }
  assert.deepEqual(ours, theirs);
}

Deno.test("createVeth places the peer directly in another netns; lists match ip -j", async () => {
  await withSockets(2, async (host, fabric) => {
    createVeth(host.sock, {
      name: "vnleni0",
      peerName: "vnlfab0",
      peerNetns: fabric.path,
      mtu: 9001,
      mac: "02:00:0A:00:00:01",
      peerMac: "02:00:0a:00:00:02",
    });
    const eni = getLink(host.sock, "vnleni0");
    assert.equal(eni.kind, "veth");
    assert.equal(eni.mtu, 9001);
    assert.equal(eni.mac, "02:00:0a:00:00:01");
    assert.equal(eni.up, false);
    assert.equal(findLink(host.sock, "vnlfab0"), undefined, "the peer is not in the host netns");
    const fab = getLink(fabric.sock, "vnlfab0");
    assert.equal(fab.mtu, 9001);
    assert.equal(fab.mac, "02:00:0a:00:00:02");
    assert.equal(fab.parentIndex, eni.index);
    assert.equal(typeof fab.linkNetnsId, "number");
    await assertSameAsIp(host);
    await assertSameAsIp(fabric);
  });
});

Deno.test("veth in one netns: up, MTU, MAC, rename, get by index, find by MAC", async () => {
  await withSockets(1, async (ns) => {
    createVeth(ns.sock, { name: "vnla", peerName: "vnlb" });
    setLinkUp(ns.sock, "vnla");
    const b = getLink(ns.sock, "vnlb");
    setLinkUp(ns.sock, b.index);
    setLinkMtu(ns.sock, "vnla", 1400);
    setLinkMac(ns.sock, "vnla", "02:11:22:33:44:55");
    let a = getLink(ns.sock, "vnla");
    assert.equal(a.up, true);
    assert.equal(a.operState, "UP");
    assert.equal(a.mtu, 1400);
    assert.equal(a.parentIndex, b.index);
    assert.deepEqual(getLink(ns.sock, a.index), a);
    assert.equal(findLinkByMac(ns.sock, "02:11:22:33:44:55")?.name, "vnla");
    assert.equal(findLinkByMac(ns.sock, "02:11:22:33:44:56"), undefined);
    await assertSameAsIp(ns);

    setLinkDown(ns.sock, "vnla");
    renameLink(ns.sock, "vnla", "vnlc");
    a = getLink(ns.sock, "vnlc");
    assert.equal(a.up, false);
    assert.equal(findLink(ns.sock, "vnla"), undefined);
    await assertSameAsIp(ns);
  });
});

Deno.test("moveLinkToNetns moves a link; deleteLink removes both veth ends", async () => {
  await withSockets(2, async (a, b) => {
    createVeth(a.sock, { name: "vnlm0", peerName: "vnlm1" });
    moveLinkToNetns(a.sock, "vnlm1", b.path);
    assert.equal(findLink(a.sock, "vnlm1"), undefined);
    assert.equal(getLink(b.sock, "vnlm1").kind, "veth");
    await assertSameAsIp(a);
    await assertSameAsIp(b);
    deleteLink(a.sock, "vnlm0");
    assert.equal(findLink(a.sock, "vnlm0"), undefined);
    assert.equal(findLink(b.sock, "vnlm1"), undefined, "deleting one end removes the peer");
    assert.deepEqual((await ipLinks(b)).map((l) => l.ifname), ["lo"]);
  });
});

Deno.test("link errors are typed and read like `RTM_NEWLINK name: File exists`", async () => {
  await withSockets(1, (ns) => {
    createVeth(ns.sock, { name: "vnle0", peerName: "vnle1" });
    assert.throws(
      () => createVeth(ns.sock, { name: "vnle0", peerName: "vnle2" }),
      (e: unknown) =>
        e instanceof ExistsError && e.message.startsWith("RTM_NEWLINK vnle0: File exists"),
    );
    assert.throws(
      () => deleteLink(ns.sock, "vnlnothere"),
      (e: unknown) =>
        e instanceof NotFoundError && e.message === "RTM_DELLINK vnlnothere: No such device",
    );
    assert.throws(() => getLink(ns.sock, 9999), NotFoundError);
    assert.throws(() => setLinkUp(ns.sock, "vnlnothere"), NotFoundError);
    deleteLink(ns.sock, "vnle0");
    assert.throws(() => deleteLink(ns.sock, "vnle0"), NotFoundError);
  });
});
