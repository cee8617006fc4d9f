import assert from "node:assert/strict";
import { type ConfigError, resolveConfig } from "../config.ts";

Deno.test("device-plugin knobs: defaults, environment, and a bad value named", () => {
  const c = resolveConfig({}, {}, {});
  assert.equal(c.devicePlugin, "auto");
  assert.equal(c.devicePluginDir, "/var/lib/kubelet/device-plugins");
  assert.equal(c.podResourcesSocket, "/var/lib/kubelet/pod-resources/kubelet.sock");
  assert.equal(
    resolveConfig({ devicePlugin: "on" }, { VPCNI_DEVICE_PLUGIN: "off" }, {}).devicePlugin,
    "off",
  );
  assert.throws(
    () => resolveConfig({}, { VPCNI_DEVICE_PLUGIN: "yes" }, {}),
    (e: ConfigError) => {
      assert.deepEqual(e.problems, [
        'devicePlugin: must be one of auto, on, off; got "yes" (from VPCNI_DEVICE_PLUGIN)',
      ]);
      return true;
    },
  );
  const fromEnv = resolveConfig({}, {
    VPCNI_DEVICE_PLUGIN_DIR: "/k/dp",
    VPCNI_POD_RESOURCES_SOCKET: "/k/pr.sock",
  }, {});
  assert.deepEqual([fromEnv.devicePluginDir, fromEnv.podResourcesSocket], ["/k/dp", "/k/pr.sock"]);
  assert.throws(
    () => resolveConfig({ devicePluginDir: "relative/dir" }, {}, {}),
    /devicePluginDir: must be an absolute path/,
  );
});
