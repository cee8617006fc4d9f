import assert from "node:assert/strict";
import { isOwnNetns, macSet, untouchableReason, unusableAddressReason } from "./guard.ts";

Deno.test("unusableAddressReason names each address no pod may have", () => {
  const cases: [string, number, RegExp][] = [
    ["0.0.0.0", 0, /this network/],
    ["0.255.0.1", 8, /this network/],
    ["127.0.0.1", 8, /loopback/],
    ["127.255.255.254", 32, /loopback/],
    ["169.254.1.1", 16, /link-local/],
    ["224.0.0.1", 4, /multicast/],
    ["239.1.2.3", 32, /multicast/],
    ["240.0.0.1", 4, /reserved/],
    ["255.255.255.255", 32, /limited broadcast/],
    ["10.0.1.255", 24, /broadcast address of 10\.0\.1\.0\/24/],
    ["10.0.1.0", 24, /network address of 10\.0\.1\.0\/24/],
    ["10.0.0.3", 30, /broadcast address of 10\.0\.0\.0\/30/],
    ["not-an-ip", 24, /not an IPv4 address/],
  ];
  for (const [ip, len, why] of cases) {
    assert.match(unusableAddressReason(ip, len) ?? "usable", why, `${ip}/${len}`);
  }
});

Deno.test("unusableAddressReason lets pod addresses through", () => {
  for (
    const [ip, len] of [
      ["10.0.1.23", 24],
      ["10.0.1.0", 32], // a /32 has no network or broadcast address
      ["10.0.1.255", 31],
      ["100.64.0.1", 10],
      ["172.31.255.254", 16],
      ["223.255.255.1", 24],
      ["169.255.0.1", 16],
    ] as const
  ) {
    assert.equal(unusableAddressReason(ip, len), undefined, `${ip}/${len}`);
  }
});

Deno.test("untouchableReason: ENI MACs and kinds the datapath never makes are left alone", () => {
  const enis = macSet(["02:AA:bb:cc:dd:01"]);
  assert.match(
    untouchableReason({ name: "eth0", kind: "veth", mac: "02:aa:bb:cc:dd:01" }, enis) ?? "",
    /one of the node's ENIs/,
  );
  assert.match(
    untouchableReason({ name: "eth1", mac: "02:aa:bb:cc:dd:09" }, enis) ?? "",
    /physical device/,
  );
  assert.match(
    untouchableReason({ name: "eth0", kind: "bridge", mac: "02:aa:bb:cc:dd:09" }, enis) ?? "",
    /a bridge/,
  );
  assert.equal(
    untouchableReason({ name: "eth0", kind: "veth", mac: "02:aa:bb:cc:dd:09" }, enis),
    undefined,
  );
  assert.equal(
    untouchableReason({ name: "eth0", kind: "ipvlan", mac: "02:aa:bb:cc:dd:09" }, enis),
    undefined,
  );
  assert.equal(
    untouchableReason({ name: "eth0", kind: "ipvlan", mac: "02:aa:bb:cc:dd:01" }, enis),
    undefined,
    "an ipvlan slave has its parent ENI's MAC and is still the pod's",
  );
});

Deno.test("isOwnNetns: the plugin's own netns by any of its names, not a missing path", () => {
  assert.equal(isOwnNetns("/proc/self/ns/net"), true);
  assert.equal(isOwnNetns("/proc/thread-self/ns/net"), true);
  assert.equal(isOwnNetns(`/proc/${Deno.pid}/ns/net`), true);
  assert.equal(isOwnNetns("/nonexistent/netns"), false);
  // Another namespace type of this very process is not its network namespace.
  assert.equal(isOwnNetns("/proc/self/ns/uts"), false);
});
