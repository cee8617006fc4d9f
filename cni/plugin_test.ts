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

Deno.test("empty stdin says so and how to pass the config by hand", async () => {
  const r = await invoke(
    { CNI_COMMAND: "ADD", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0", CNI_NETNS: "/x" },
    "",
  );
  assert.equal(r.code, 1);
  assert.equal(r.json.code, 6);
  assert.match(r.json.msg, /not JSON \(stdin is empty\)/);
  assert.match(r.json.details, /pipe it in/);
});

Deno.test("a verb newer than the config's cniVersion names the version and the fix", async () => {
  const r = await invoke(
    { CNI_COMMAND: "STATUS" },
    '{"cniVersion":"1.0.0","name":"n","type":"vpcni"}',
  );
  assert.equal(r.json.code, 1);
  assert.match(r.json.msg, /STATUS needs a newer cniVersion than 1\.0\.0/);
  assert.match(r.json.details, /STATUS exists from cniVersion 1\.1\.0; raise cniVersion/);
  const ipam = await invoke(
    { CNI_COMMAND: "CHECK", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0", CNI_NETNS: "/x" },
    '{"cniVersion":"0.3.1","name":"n","type":"ptp","ipam":{"type":"vpcni"}}',
  );
  assert.equal(ipam.json.code, 1, JSON.stringify(ipam.json));
  assert.match(ipam.json.details, /CHECK exists from cniVersion 0\.4\.0/);
});
