import assert from "node:assert/strict";
import {
  addAddress,
  type Address,
  createVeth,
  deleteAddress,
  ExistsError,
  getLink,
  listAddresses,
  listRoutes,
  NotFoundError,
  setLinkUp,
} from "../../netlink/mod.ts";
import { type NetnsWithSocket, withSockets } from "./fixture.ts";
import { ipJson } from "../helpers/sh.ts";

interface IpAddr {
  ifindex: number;
  addr_info: { family: string; local: string; prefixlen: number; scope: string; label?: string }[];
}

async function ipAddresses(ns: NetnsWithSocket): Promise<Address[]> {
  const out: Address[] = [];
  for (const l of await ipJson<IpAddr[]>(["addr", "show"], ns.name)) {
    for (const a of l.addr_info) {
      const addr: Address = {
        index: l.ifindex,
        family: a.family === "inet" ? 4 : 6,
        address: a.local,
        prefixLen: a.prefixlen,
        scope: a.scope === "global" ? "universe" : a.scope,
      };
      if (a.label !== undefined) addr.label = a.label;
      out.push(addr);
    }
  }
  return out;
}

const key = (a: Address) => `${a.index} ${a.address}/${a.prefixLen}`;
const sorted = (xs: Address[]) => [...xs].sort((a, b) => key(a).localeCompare(key(b)));

Deno.test("addAddress/listAddresses (IPv4 and IPv6) match ip -j addr", async () => {
  await withSockets(1, async (ns) => {
    createVeth(ns.sock, { name: "vnla0", peerName: "vnla1" });
    setLinkUp(ns.sock, "vnla0");
    addAddress(ns.sock, "vnla0", "10.40.0.5/32");
    addAddress(ns.sock, "vnla0", "10.41.0.1/24", { scope: "link" });
    addAddress(ns.sock, "vnla0", "fd00:40::5/64", { noPrefixRoute: true });
    addAddress(ns.sock, "vnla1", "10.42.0.1/16");

    const idx = getLink(ns.sock, "vnla0").index;
    const mine = listAddresses(ns.sock, { link: "vnla0", family: 4 });
    assert.deepEqual(sorted(mine), [
      {
        index: idx,
        family: 4,
        address: "10.40.0.5",
        prefixLen: 32,
        scope: "universe",
        label: "vnla0",
      },
      { index: idx, family: 4, address: "10.41.0.1", prefixLen: 24, scope: "link", label: "vnla0" },
    ]);
    const v6 = listAddresses(ns.sock, { link: idx, family: 6 }).map((a) => a.address);
    assert.ok(v6.includes("fd00:40::5"), `v6 on vnla0: ${v6}`);
    assert.deepEqual(sorted(listAddresses(ns.sock)), sorted(await ipAddresses(ns)));

    // noPrefixRoute: no fd00:40::/64 route; the IPv4 /24 got its subnet route.
    const routes = listRoutes(ns.sock, { dev: "vnla0" }).map((r) => r.dst);
    assert.ok(!routes.includes("fd00:40::/64"), routes.join(","));
    assert.ok(routes.includes("10.41.0.0/24"), routes.join(","));
  });
});

Deno.test("deleteAddress removes exactly one address; errors are typed", async () => {
  await withSockets(1, async (ns) => {
    createVeth(ns.sock, { name: "vnld0", peerName: "vnld1" });
    addAddress(ns.sock, "vnld0", "10.50.0.5/32");
    addAddress(ns.sock, "vnld0", "10.50.0.6/32");
    assert.throws(
      () => addAddress(ns.sock, "vnld0", "10.50.0.5/32"),
      (e: unknown) =>
        e instanceof ExistsError &&
        e.message.startsWith("RTM_NEWADDR 10.50.0.5/32 dev vnld0: File exists"),
    );
    deleteAddress(ns.sock, "vnld0", "10.50.0.5/32");
    assert.deepEqual(listAddresses(ns.sock, { link: "vnld0" }).map((a) => a.address), [
      "10.50.0.6",
    ]);
    assert.deepEqual(sorted(listAddresses(ns.sock)), sorted(await ipAddresses(ns)));
    assert.throws(() => deleteAddress(ns.sock, "vnld0", "10.50.0.5/32"), NotFoundError);
    assert.throws(() => addAddress(ns.sock, "vnlnothere", "10.50.0.7/32"), NotFoundError);
  });
});
