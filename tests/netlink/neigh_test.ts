import assert from "node:assert/strict";
import {
  createVeth,
  deleteNeighbour,
  getLink,
  listNeighbours,
  type Neighbour,
  NotFoundError,
  setLinkUp,
  setNeighbour,
} from "../../netlink/mod.ts";
import { type NetnsWithSocket, withSockets } from "./fixture.ts";
import { ipJson } from "../helpers/sh.ts";

interface IpNeigh {
  dst: string;
  dev: string;
  lladdr?: string;
  state: string[];
}

async function assertSameAsIp(ns: NetnsWithSocket, dev: string) {
  const index = getLink(ns.sock, dev).index;
  const theirs = (await ipJson<IpNeigh[]>(["neigh", "show", "dev", dev], ns.name)).map(
    (j): Neighbour => {
      const n: Neighbour = {
        index,
        family: j.dst.includes(":") ? 6 : 4,
        ip: j.dst,
        state: j.state.map((s) => s.toLowerCase()).join(","),
      };
      if (j.lladdr !== undefined) n.mac = j.lladdr;
      return n;
    },
  );
  const k = (n: Neighbour) => n.ip;
  assert.deepEqual(
    listNeighbours(ns.sock, { link: dev }).sort((a, b) => k(a).localeCompare(k(b))),
    theirs.sort((a, b) => k(a).localeCompare(k(b))),
  );
}

Deno.test("setNeighbour adds or replaces permanent entries; list matches ip -j neigh", async () => {
  await withSockets(1, async (ns) => {
    createVeth(ns.sock, { name: "vnln0", peerName: "vnln1" });
    setLinkUp(ns.sock, "vnln0");
    setNeighbour(ns.sock, { link: "vnln0", ip: "169.254.1.1", mac: "02:00:00:00:01:01" });
    setNeighbour(ns.sock, { link: "vnln0", ip: "fd00::1", mac: "02:00:00:00:01:02" });
    // add-or-replace: a second call with a new MAC replaces the entry
    setNeighbour(ns.sock, { link: "vnln0", ip: "169.254.1.1", mac: "02:00:00:00:01:03" });
    const index = getLink(ns.sock, "vnln0").index;
    const v4 = listNeighbours(ns.sock, { link: "vnln0", family: 4 });
    assert.deepEqual(v4, [
      { index, family: 4, ip: "169.254.1.1", mac: "02:00:00:00:01:03", state: "permanent" },
    ]);
    const v6 = listNeighbours(ns.sock, { link: index, family: 6 }).find((n) => n.ip === "fd00::1");
    assert.equal(v6?.mac, "02:00:00:00:01:02");
    assert.equal(v6?.state, "permanent");
    await assertSameAsIp(ns, "vnln0");
  });
});

Deno.test("deleteNeighbour removes the entry; deleting it again is NotFoundError", async () => {
  await withSockets(1, async (ns) => {
    createVeth(ns.sock, { name: "vnln0", peerName: "vnln1" });
    setNeighbour(ns.sock, { link: "vnln0", ip: "10.9.0.1", mac: "02:00:00:00:02:01" });
    setNeighbour(ns.sock, { link: "vnln0", ip: "10.9.0.2", mac: "02:00:00:00:02:02" });
    deleteNeighbour(ns.sock, { link: "vnln0", ip: "10.9.0.1" });
    assert.deepEqual(listNeighbours(ns.sock, { link: "vnln0" }).map((n) => n.ip), ["10.9.0.2"]);
    await assertSameAsIp(ns, "vnln0");
    assert.throws(() => deleteNeighbour(ns.sock, { link: "vnln0", ip: "10.9.0.1" }), NotFoundError);
  });
});
