import assert from "node:assert/strict";
import { parseIpamRequest } from "./ipam_validate.ts";

const refusal = (body: unknown) => {
  const r = parseIpamRequest(JSON.stringify(body));
  assert.ok("ok" in r, `refused: ${JSON.stringify(body)}`);
  return r as { ok: false; code: number; msg: string };
};

Deno.test("the daemon reads each request in the version it belongs to", () => {
  const key = { network: "n", containerId: "c", ifName: "eth0" };
  assert.deepEqual(parseIpamRequest(JSON.stringify({ version: 1, op: "del", ...key })), {
    version: 1,
    op: "del",
    ...key,
  });
  const cni = { version: 2, op: "cni", env: { CNI_COMMAND: "ADD" }, stdin: "{}" };
  assert.deepEqual(parseIpamRequest(JSON.stringify(cni)), cni);
  // A reservation request of protocol 2, or an invocation of protocol 1: a skew, code 1.
  const r1 = refusal({ version: 2, op: "del", ...key });
  assert.equal(r1.code, 1);
  assert.match(r1.msg, /version 2 is not spoken for del; this daemon speaks 1 and 2/);
  assert.equal(refusal({ ...cni, version: 1 }).code, 1);
  assert.equal(refusal({ ...cni, version: 3 }).code, 1);
  // Malformed: code 6 naming the field.
  assert.equal(refusal({ version: 1, op: "nope" }).code, 6);
  assert.match(refusal({ version: 1, op: "del", ...key, ifName: "x".repeat(16) }).msg, /ifName/);
  assert.match(refusal({ op: "del", ...key }).msg, /version: required/);
  assert.match(refusal({ ...cni, env: { CNI_COMMAND: 1 } }).msg, /env\.CNI_COMMAND/);
  assert.equal(refusal("a string, not an object").code, 6);
  const notJson = parseIpamRequest("not json");
  assert.ok("ok" in notJson && notJson.code === 6 && /not JSON/.test(notJson.msg));
});

Deno.test("an op named after an Object.prototype member is an unknown op (code 6)", () => {
  for (const op of ["constructor", "toString", "hasOwnProperty", "__proto__", "valueOf"]) {
    for (const body of [{ version: 1, op }, { op }]) {
      const r = refusal(body);
      assert.equal(r.code, 6, `${JSON.stringify(body)}: ${r.msg}`);
      assert.match(r.msg, /op: expected one of add, del/);
    }
  }
});
