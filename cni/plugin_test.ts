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

Deno.test("stdin beyond 1 MiB is refused before it is parsed (code 7 naming the bound)", async () => {
  let asked = 0;
  let out = "";
  const io: PluginIo = {
    getEnv: (n) => ({ CNI_COMMAND: "ADD", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" })[n],
    readStdin: (limit) => {
      asked = limit;
      return new Uint8Array(limit + 1).fill(0x20);
    },
    writeStdout: (t) => (out += t),
  };
  assert.equal(await runPlugin(io), 1);
  assert.equal(asked, 1024 * 1024);
  const json = JSON.parse(out);
  assert.equal(json.code, 7);
  assert.match(json.msg, /stdin holds more than 1048576 bytes/);
});

Deno.test("an unexpected exception is code 999 naming the verb, with no stack trace", async () => {
  let out = "";
  const io: PluginIo = {
    getEnv: (n) => {
      if (n === "CNI_COMMAND") return "DEL";
      throw new RangeError("environment exploded");
    },
    readStdin: () => new TextEncoder().encode('{"cniVersion":"1.0.0","name":"n","type":"vpcni"}'),
    writeStdout: (t) => (out += t),
  };
  assert.equal(await runPlugin(io), 1);
  const json = JSON.parse(out);
  assert.equal(json.code, 999);
  assert.equal(json.cniVersion, "1.0.0");
  assert.match(json.msg, /during DEL: environment exploded/);
  assert.doesNotMatch(out, /^\s+at\s|\.ts:\d+:\d+/m);
});
