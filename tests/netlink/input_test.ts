/**
 * Bad input is refused before any syscall, with a clear message, and changes nothing.
 *
 * "Before any syscall" is shown with a socket stand-in whose every method throws: a mock is
 * the only way to observe that no request reached the kernel. "Changes nothing" is shown on
 * the real kernel by comparing iproute2's view before and after.
 */
import assert from "node:assert/strict";
import {
  addAddress,
  addRoute,
  addRule,
  createIpvlan,
  createVeth,
  deleteAddress,
  deleteRoute,
  deleteRule,
  InvalidInputError,
  listAddresses,
  listRoutes,
  moveLinkToNetns,
  type NetlinkSocket,
  renameLink,
  setLinkMac,
  setLinkMtu,
  setNeighbour,
} from "../../netlink/mod.ts";
import { ipLinks, threadNetnsInode, withSockets } from "./fixture.ts";
import { ipJson } from "../helpers/sh.ts";

const noSyscalls = new Proxy({}, {
  get(_t, prop) {
    if (prop === Symbol.dispose || prop === "close") return () => {};
    return () => {
      throw new Error(`a netlink request (${String(prop)}) was attempted`);
    };
  },
}) as NetlinkSocket;

const MISSING_NS = "/run/netns/vnl-does-not-exist";

/** [what, call, expected message] — each must throw InvalidInputError before any request. */
const CASES: [string, (s: NetlinkSocket) => unknown, RegExp][] = [
  [
    "veth name over 15 bytes",
    (s) => createVeth(s, { name: "vnl0123456789abc", peerName: "vnlp" }),
    /veth name "vnl0123456789abc" is 16 bytes; the kernel allows at most 15/,
  ],
  [
    "name with '/'",
    (s) => createVeth(s, { name: "vnl/a", peerName: "vnlp" }),
    /must not contain '\/'/,
  ],
  ["name with whitespace", (s) => createVeth(s, { name: "vnl a", peerName: "vnlp" }), /whitespace/],
  [
    "peer netns missing",
    (s) => createVeth(s, { name: "vnla", peerName: "vnlp", peerNetns: MISSING_NS }),
    /netns path \/run\/netns\/vnl-does-not-exist does not exist/,
  ],
  [
    "bad MAC",
    (s) => createVeth(s, { name: "vnla", peerName: "vnlp", mac: "02:00:00" }),
    /invalid MAC address/,
  ],
  ["MTU out of range", (s) => setLinkMtu(s, "vnla", 20), /MTU must be an integer in 68..65535/],
  ["rename to a long name", (s) => renameLink(s, "vnla", "x".repeat(16)), /16 bytes/],
  ["setLinkMac bad MAC", (s) => setLinkMac(s, "vnla", "zz:00:00:00:00:00"), /invalid MAC/],
  ["move to a missing netns", (s) => moveLinkToNetns(s, "vnla", MISSING_NS), /does not exist/],
  [
    "ipvlan into a missing netns",
    (s) => createIpvlan(s, { name: "vnli", parent: "vnla", mode: "l2", netns: MISSING_NS }),
    /does not exist/,
  ],
  [
    "ipvlan bad mode",
    (s) => createIpvlan(s, { name: "vnli", parent: "vnla", mode: "l4" as "l2" }),
    /ipvlan mode must be l2, l3 or l3s/,
  ],
  ["address without prefix", (s) => addAddress(s, "vnla", "10.0.0.5"), /expected address\/prefix/],
  ["address bad CIDR", (s) => addAddress(s, "vnla", "10.0.0.500/32"), /invalid address/],
  [
    "address bad prefix",
    (s) => deleteAddress(s, "vnla", "10.0.0.5/40"),
    /prefix length must be 0..32/,
  ],
  [
    "list with family 5",
    (s) => listAddresses(s, { family: 5 as 4 }),
    /address family must be 4 or 6/,
  ],
  [
    "route gateway of the wrong family",
    (s) => addRoute(s, { dst: "10.0.0.0/8", gateway: "fd00::1" }),
    /wrong address family: route gateway fd00::1 is IPv6 but dst 10.0.0.0\/8 is IPv4/,
  ],
  [
    "route src of the wrong family",
    (s) => deleteRoute(s, { dst: "fd00::/8", src: "10.0.0.1" }),
    /wrong address family/,
  ],
  [
    "route table out of range",
    (s) => addRoute(s, { dst: "default", table: -1 }),
    /route table must be/,
  ],
  ["route dev name too long", (s) => listRoutes(s, { dev: "x".repeat(20) }), /20 bytes/],
  [
    "rule priority above 2^32-1",
    (s) => addRule(s, { priority: 2 ** 32, table: 100 }),
    /rule priority must be an integer in 0..4294967295, got 4294967296/,
  ],
  ["rule priority negative", (s) => deleteRule(s, { priority: -1, table: 100 }), /rule priority/],
  [
    "rule from/to of different families",
    (s) => addRule(s, { priority: 5, src: "10.0.0.0/8", dst: "fd00::/8", table: 100 }),
    /wrong address family: rule to fd00::\/8 is IPv6 but the rule is IPv4/,
  ],
  [
    "rule family 6 with an IPv4 source",
    (s) => addRule(s, { priority: 5, family: 6, src: "10.0.0.0/8", table: 100 }),
    /wrong address family/,
  ],
  ["rule iif with '/'", (s) => addRule(s, { priority: 5, iif: "a/b", table: 100 }), /rule iif/],
  [
    "neighbour bad MAC",
    (s) => setNeighbour(s, { link: "vnla", ip: "10.0.0.1", mac: "nope" }),
    /invalid MAC address "nope"/,
  ],
  [
    "neighbour bad IP",
    (s) => setNeighbour(s, { link: "vnla", ip: "10.0.0", mac: "02:00:00:00:00:01" }),
    /invalid neighbour IP "10.0.0"/,
  ],
];

Deno.test("bad input is refused with InvalidInputError before any request", () => {
  for (const [what, call, message] of CASES) {
    assert.throws(
      () => call(noSyscalls),
      (e: unknown) => {
        assert.ok(e instanceof InvalidInputError, `${what}: got ${e}`);
        assert.match(e.message, message, what);
        return true;
      },
      what,
    );
  }
});

Deno.test("bad input changes nothing in the kernel and leaves the thread at home", async () => {
  await withSockets(1, async (ns) => {
    createVeth(ns.sock, { name: "vnla", peerName: "vnlb" });
    const home = threadNetnsInode();
    const snapshot = async () =>
      JSON.stringify([
        await ipLinks(ns),
        await ipJson(["addr", "show"], ns.name),
        await ipJson(["route", "show", "table", "all"], ns.name),
        await ipJson(["rule", "show"], ns.name),
        await ipJson(["neigh", "show"], ns.name),
      ]);
    const before = await snapshot();
    for (const [what, call] of CASES) {
      assert.throws(() => call(ns.sock), InvalidInputError, what);
    }
    assert.equal(await snapshot(), before);
    assert.equal(threadNetnsInode(), home);
  });
});
