import assert from "node:assert/strict";
import { eniAddress, eniLinkSysctls, eniTableRoutes } from "./host.ts";
import type { DatapathConfig, DatapathEni } from "./types.ts";

const ENI: DatapathEni = {
  id: "eni-1",
  mac: "02:00:00:00:01:00",
  deviceIndex: 2,
  primary: false,
  subnetId: "subnet-b",
  subnetCidr: "10.0.1.0/24",
  gateway: "10.0.1.1",
  routeTable: 0,
  primaryIp: "10.0.1.4",
};
const cfg = (kind: DatapathConfig["kind"]): DatapathConfig => ({
  kind,
  mtu: 9001,
  serviceCidrs: [],
  nodeIps: [],
  hostVethPrefix: "vpc",
});

Deno.test("T(E) holds the gateway, the default route and the subnet, in table 100 + device", () => {
  assert.deepEqual(eniTableRoutes(ENI, "eth2"), [
    { dst: "10.0.1.1/32", dev: "eth2", scope: "link", table: 102 },
    { dst: "default", gateway: "10.0.1.1", dev: "eth2", scope: "universe", table: 102 },
    { dst: "10.0.1.0/24", dev: "eth2", scope: "link", table: 102 },
  ]);
});

Deno.test("a secondary ENI's link carries its primary IP; the primary ENI's is left alone", () => {
  assert.equal(eniAddress(ENI), "10.0.1.4/24");
  assert.equal(eniAddress({ ...ENI, primaryIp: undefined }), undefined);
  assert.equal(eniAddress({ ...ENI, deviceIndex: 0, primary: true }), undefined);
});

Deno.test("proxy ARP on ENI links for veth and l3s, not for l2 (slaves answer themselves)", () => {
  assert.deepEqual(eniLinkSysctls(cfg("veth"), "eth1.100"), [
    ["net/ipv4/conf/eth1.100/proxy_arp", "1"],
    ["net/ipv4/neigh/eth1.100/proxy_delay", "0"],
  ]);
  assert.equal(eniLinkSysctls(cfg("ipvlan-l3s"), "eth1").length, 2);
  assert.deepEqual(eniLinkSysctls(cfg("ipvlan-l2"), "eth1"), []);
});
