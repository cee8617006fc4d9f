/**
 * The demo's node is no kubelet node: the configuration and environment its daemon runs
 * with keep the device plugin off, even where the user's shell turns it on, so the demo
 * never talks to the host's kubelet under /var/lib/kubelet nor registers devices with it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { resolveConfig } from "../../ipam/config.ts";
import { demoDaemonConfig, demoDaemonEnv } from "../../cli/demo_world.ts";

Deno.test("demo: the daemon's device plugin is off, whatever the user's environment says", () => {
  const file = demoDaemonConfig({
    ec2Endpoint: "http://127.0.0.1:1",
    imdsEndpoint: "http://127.0.0.1:2",
    socketPath: "/tmp/vpcni-demo/ipam.sock",
    stateDir: "/tmp/vpcni-demo/state",
    listen: "127.0.0.1:61679",
    datapath: "veth",
  });
  // The daemon inherits the user's environment, with the demo's own on top.
  for (const user of [{}, { VPCNI_DEVICE_PLUGIN: "on" }, { VPCNI_DEVICE_PLUGIN: "auto" }]) {
    const cfg = resolveConfig(file, { ...user, ...demoDaemonEnv() }, {});
    assert.equal(cfg.devicePlugin, "off", `with ${JSON.stringify(user)}`);
  }
});
