import assert from "node:assert/strict";
import { DatapathInputError } from "./errors.ts";
import type { DatapathConfig, PodAttachment } from "./types.ts";
import { podAttachment, secondaryEni, VETH_CFG } from "../../tests/helpers/datapath_node.ts";
import { validateAttachment, validateConfig, validateDetachment } from "./validate.ts";

const CFG = VETH_CFG;
/** Pod 0's attachment without an ENI: 10.0.1.20/24, gateway 10.0.1.1. */
const POD = podAttachment("abc", "/run/netns/x");

Deno.test("validateConfig names the bad field", () => {
  const cases: [Partial<DatapathConfig>, RegExp][] = [
    [
      { kind: "macvlan" as "veth" },
      /datapath "macvlan" is unknown; use one of ipvlan-l2, ipvlan-l3s, veth/,
    ],
    [{ mtu: 100 }, /mtu must be an integer in 576\.\.9001/],
    [{ mtu: 1500.5 }, /mtu/],
    [{ serviceCidrs: ["10.96.0.0"] }, /serviceCidrs entry "10\.96\.0\.0"/],
    [{ nodeIps: ["10.0.0.300"] }, /nodeIps entry/],
    [{ hostVethPrefix: "vpcni" }, /hostVethPrefix/],
  ];
  for (const [patch, msg] of cases) {
    assert.throws(() => validateConfig({ ...CFG, ...patch }), (e: unknown) => {
      assert.ok(e instanceof DatapathInputError);
      assert.match(e.message, msg);
      return true;
    });
  }
  assert.equal(validateConfig(CFG), CFG);
});

Deno.test("validateAttachment names the bad field", () => {
  const eni = secondaryEni("02:00:00:00:01:00");
  const cases: [PodAttachment, RegExp][] = [
    [{ ...POD, containerId: "" }, /containerId/],
    [{ ...POD, containerId: "a/b" }, /containerId/],
    [{ ...POD, ifName: "eth0/1" }, /ifName "eth0\/1" is not a valid interface name/],
    [{ ...POD, ifName: "a-very-long-ifname" }, /ifName .* 18 bytes; at most 15/],
    [{ ...POD, netns: "relative/ns" }, /netns .* absolute path/],
    [{ ...POD, address: { ...POD.address, ip: "10.0.1" } }, /address\.ip/],
    [{ ...POD, address: { ...POD.address, prefixLen: 33 } }, /prefixLen/],
    [{ ...POD, address: { ...POD.address, gateway: "10.0.1.20" } }, /equals the pod address/],
    [{ ...POD, address: { ...POD.address, eni: { ...eni, mac: "02:00:00:00:01" } } }, /eni\.mac/],
    [
      { ...POD, address: { ...POD.address, eni: { ...eni, subnetCidr: "10.0.2.0/24" } } },
      /outside the ENI's subnet 10\.0\.2\.0\/24/,
    ],
    [{ ...POD, address: { ...POD.address, eni: { ...eni, routeTable: 254 } } }, /routeTable 254/],
  ];
  for (const [pod, msg] of cases) {
    assert.throws(() => validateAttachment(pod), (e: unknown) => {
      assert.ok(e instanceof DatapathInputError, String(e));
      assert.match(e.message, msg);
      return true;
    });
  }
  assert.equal(validateAttachment({ ...POD, address: { ...POD.address, eni } }).ifName, "eth0");
  assert.equal(validateDetachment({ containerId: "abc", ifName: "eth0" }).ifName, "eth0");
});
