import assert from "node:assert/strict";
import {
  addAddress,
  addRoute,
  createVeth,
  deleteRoute,
  ExistsError,
  InvalidError,
  InvalidInputError,
  type Link,
  listLinks,
  listRoutes,
  MAIN_TABLE,
  NetlinkError,
  NotFoundError,
  replaceRoute,
  type Route,
  setLinkUp,
} from "../../netlink/mod.ts";
import { type NetnsWithSocket, withSockets } from "./fixture.ts";
import { run } from "../helpers/sh.ts";

interface IpRoute {
  type?: string;
  dst: string;
  gateway?: string;
  dev?: string;
  protocol?: string;
  scope?: string;
  metric?: number;
  flags?: string[];
  prefsrc?: string;
  metrics?: { mtu?: number }[];
}

// iproute2 leaves "protocol" out for boot (3), its default.
const PROTOCOLS: Record<number, string | undefined> = { 2: "kernel", 3: undefined, 4: "static" };

/** Our route in iproute2's JSON vocabulary. */
function asIp(r: Route, links: Link[]) {
  return {
    type: r.type === "unicast" ? undefined : r.type,
    dst: r.dst.replace(r.family === 4 ? /\/32$/ : /\/128$/, ""),
    gateway: r.gateway,
    dev: links.find((l) => l.index === r.dev)?.name,
    protocol: r.protocol! in PROTOCOLS ? PROTOCOLS[r.protocol!] : String(r.protocol),
    scope: r.scope === "universe" ? undefined : r.scope,
    metric: r.metric || undefined,
    onlink: r.onlink === true,
    prefsrc: r.src,
    mtu: r.mtu,
  };
}

function ipView(j: IpRoute) {
  return {
    type: j.type === "unicast" ? undefined : j.type,
    dst: j.dst,
    gateway: j.gateway,
    dev: j.dev,
    protocol: j.protocol === "boot" ? undefined : j.protocol,
    scope: j.scope === "global" ? undefined : j.scope,
    metric: j.metric || undefined,
    onlink: j.flags?.includes("onlink") ?? false,
    prefsrc: j.prefsrc,
    mtu: j.metrics?.find((m) => m.mtu !== undefined)?.mtu,
  };
}

/** `ip -j route show table N`; a table the kernel never created is empty. */
async function ipRoutes(ns: NetnsWithSocket, family: 4 | 6, table: number): Promise<IpRoute[]> {
  const r = await run(["ip", "-j", `-${family}`, "route", "show", "table", String(table)], {
    netns: ns.name,
  });
  if (r.code !== 0 && /FIB table does not exist/.test(r.stderr)) return [];
  if (r.code !== 0) throw new Error(`ip route show failed: ${r.stderr}`);
  return r.stdout.trim() === "" ? [] : JSON.parse(r.stdout);
}

async function assertTableSameAsIp(ns: NetnsWithSocket, table: number) {
  const links = listLinks(ns.sock);
  for (const family of [4, 6] as const) {
    const ours = listRoutes(ns.sock, { table, family }).map((r) => asIp(r, links));
    const theirs = (await ipRoutes(ns, family, table)).map(ipView);
    const k = (x: { dst: string; metric?: number }) => `${x.dst} ${x.metric}`;
    assert.deepEqual(
      ours.sort((a, b) => k(a).localeCompare(k(b))),
      theirs.sort((a, b) => k(a).localeCompare(k(b))),
      `table ${table} IPv${family}`,
    );
  }
}

/** A netns whose veth "ENI" vnlr0 is up with 10.60.0.10/24 and fd00:60::10/64. */
function eni(ns: NetnsWithSocket): void {
  createVeth(ns.sock, { name: "vnlr0", peerName: "vnlr1" });
  setLinkUp(ns.sock, "vnlr0");
  setLinkUp(ns.sock, "vnlr1");
  addAddress(ns.sock, "vnlr0", "10.60.0.10/24");
  addAddress(ns.sock, "vnlr0", "fd00:60::10/64", { noPrefixRoute: false });
}

Deno.test("routes with table, scope, gateway, src, onlink, MTU, metric match ip -j route", async () => {
  await withSockets(1, async (ns) => {
    eni(ns);
    const T = 100;
    addRoute(ns.sock, { dst: "10.60.0.1", dev: "vnlr0", scope: "link", table: T });
    addRoute(ns.sock, { dst: "default", gateway: "10.60.0.1", dev: "vnlr0", table: T });
    addRoute(ns.sock, {
      dst: "10.70.0.0/16",
      gateway: "10.60.0.1",
      dev: "vnlr0",
      table: T,
      metric: 10,
      mtu: 1400,
      src: "10.60.0.10",
    });
    addRoute(ns.sock, {
      dst: "10.80.0.0/16",
      gateway: "192.168.9.1",
      dev: "vnlr0",
      onlink: true,
      table: T,
    });
    addRoute(ns.sock, { dst: "10.90.0.0/16", type: "blackhole", table: T });
    addRoute(ns.sock, {
      dst: "fd00:70::/48",
      gateway: "fd00:60::1",
      dev: "vnlr0",
      table: T,
      metric: 20,
    });
    addRoute(ns.sock, { dst: "10.61.0.5/32", dev: "vnlr0" }); // main table, link scope by default
    addRoute(ns.sock, { dst: "10.62.0.0/16", dev: "vnlr0", table: 70000 }); // table id > 255

    const t = listRoutes(ns.sock, { table: T });
    const dflt = t.find((r) => r.dst === "default")!;
    assert.equal(dflt.gateway, "10.60.0.1");
    assert.equal(dflt.scope, "universe");
    const gw = t.find((r) => r.dst === "10.60.0.1/32")!;
    assert.equal(gw.scope, "link");
    const wide = t.find((r) => r.dst === "10.70.0.0/16")!;
    assert.deepEqual([wide.metric, wide.mtu, wide.src], [10, 1400, "10.60.0.10"]);
    assert.equal(t.find((r) => r.dst === "10.80.0.0/16")!.onlink, true);
    assert.equal(t.find((r) => r.dst === "10.90.0.0/16")!.type, "blackhole");
    assert.equal(listRoutes(ns.sock, { table: T, family: 6 })[0].dst, "fd00:70::/48");
    const main = listRoutes(ns.sock, { table: MAIN_TABLE, family: 4 }).find((r) =>
      r.dst === "10.61.0.5/32"
    )!;
    assert.equal(main.scope, "link");
    assert.equal(listRoutes(ns.sock, { table: 70000 })[0].dst, "10.62.0.0/16");

    await assertTableSameAsIp(ns, T);
    await assertTableSameAsIp(ns, MAIN_TABLE);
    await assertTableSameAsIp(ns, 70000);
  });
});

Deno.test("replaceRoute swaps the next hop; deleteRoute removes; errors are typed", async () => {
  await withSockets(1, async (ns) => {
    eni(ns);
    const r = { dst: "10.71.0.0/16", gateway: "10.60.0.1", dev: "vnlr0", table: 101 };
    addRoute(ns.sock, r);
    assert.throws(
      () => addRoute(ns.sock, r),
      (e: unknown) =>
        e instanceof ExistsError &&
        e.message.startsWith(
          "RTM_NEWROUTE 10.71.0.0/16 via 10.60.0.1 dev vnlr0 table 101: File exists",
        ),
    );
    replaceRoute(ns.sock, { ...r, gateway: "10.60.0.2" });
    assert.deepEqual(listRoutes(ns.sock, { table: 101 }).map((x) => x.gateway), ["10.60.0.2"]);
    replaceRoute(ns.sock, { dst: "10.72.0.0/16", dev: "vnlr0", table: 101 }); // replace also creates
    await assertTableSameAsIp(ns, 101);
    deleteRoute(ns.sock, { dst: "10.71.0.0/16", table: 101 });
    deleteRoute(ns.sock, { dst: "10.72.0.0/16", dev: "vnlr0", table: 101 });
    assert.deepEqual(listRoutes(ns.sock, { table: 101 }), []);
    assert.throws(() => deleteRoute(ns.sock, { dst: "10.71.0.0/16", table: 101 }), NotFoundError);
    // The kernel's extended-ack text rides along in the message and in .extack.
    assert.throws(
      () => addRoute(ns.sock, { dst: "10.99.0.0/16", gateway: "192.0.2.1", dev: "vnlr0" }),
      (e: unknown) =>
        e instanceof NetlinkError && e.errno === 101 && /gateway/i.test(e.extack ?? "") &&
        e.message.startsWith(
          "RTM_NEWROUTE 10.99.0.0/16 via 192.0.2.1 dev vnlr0: Network is unreachable (",
        ),
    );
    assert.throws(
      () => addRoute(ns.sock, { dst: "10.98.0.0/16", gateway: "10.60.0.1", type: "local" }),
      (e: unknown) => e instanceof InvalidError && /scope/.test(e.extack ?? ""),
    );
    assert.throws(
      () => addRoute(ns.sock, { dst: "10.73.0.0/16", gateway: "fd00:60::1", table: 101 }),
      (e: unknown) => e instanceof InvalidInputError && /wrong address family/.test(e.message),
    );
  });
});
