import assert from "node:assert/strict";
import { type PluginIo, runPlugin } from "./plugin.ts";

async function invoke(env: Record<string, string>, stdin: string) {
  let out = "";
  const io: PluginIo = {
    getEnv: (n) => env[n],
    readStdin: () => new TextEncoder().encode(stdin),
    writeStdout: (t) => (out += t),
  };
  const code = await runPlugin(io);
  return { code, json: JSON.parse(out) };
}

Deno.test("VERSION echoes the caller's cniVersion and lists every supported version", async () => {
  const r = await invoke({ CNI_COMMAND: "VERSION" }, '{"cniVersion":"0.4.0"}');
  assert.equal(r.code, 0);
  assert.deepEqual(r.json, {
    cniVersion: "0.4.0",
    supportedVersions: ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"],
  });
  const bare = await invoke({ CNI_COMMAND: "VERSION" }, "");
  assert.equal(bare.json.cniVersion, "1.1.0");
});

Deno.test("errors are the spec's JSON in the request's version, exit 1", async () => {
  const r = await invoke(
    { CNI_COMMAND: "DEL", CNI_IFNAME: "eth0" },
    '{"cniVersion":"0.3.1","name":"n","type":"vpcni"}',
  );
  assert.equal(r.code, 1);
  assert.deepEqual(r.json, {
    cniVersion: "0.3.1",
    code: 4,
    msg: "CNI_CONTAINERID is required for DEL but is not set",
  });
  const noCmd = await invoke({}, "{}");
  assert.deepEqual(noCmd.json, { cniVersion: "1.1.0", code: 4, msg: "CNI_COMMAND is not set" });
});
