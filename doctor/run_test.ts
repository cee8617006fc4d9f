import assert from "node:assert/strict";
import { datapathSettings } from "./run.ts";

const conflists = new URL("../examples/conflists/", import.meta.url).pathname;

Deno.test("the datapath settings come from the conflist's vpcni plugin", () => {
  assert.deepEqual(datapathSettings(`${conflists}30-vpcni-chained.conflist`, "ipvlan-l2"), {
    kind: "veth",
    hostVethPrefix: "vpc",
    mtu: 9001,
    serviceCidrs: [],
  });
  const missing = datapathSettings("/nonexistent.conflist", "ipvlan-l3s");
  assert.equal(
    typeof missing === "object" && missing.kind,
    "ipvlan-l3s",
    "daemon's datapath as fallback",
  );
});

Deno.test("vpcni as IPAM under another plugin: the datapath is that plugin's", () => {
  assert.equal(datapathSettings(`${conflists}20-vpcni-ipvlan.conflist`, "ipvlan-l2"), "ipvlan");
});
