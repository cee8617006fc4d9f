import assert from "node:assert/strict";
import {
  BusyError,
  errorFromErrno,
  ExistsError,
  InvalidError,
  isExists,
  isNotFound,
  NetlinkError,
  NotFoundError,
  PermissionError,
} from "./errors.ts";

Deno.test("errors read like `RTM_NEWLINK eth1: File exists` and carry the extack", () => {
  const e = errorFromErrno({ errno: 17, op: "RTM_NEWLINK", subject: "eth1" });
  assert.ok(e instanceof ExistsError && e instanceof NetlinkError);
  assert.equal(e.message, "RTM_NEWLINK eth1: File exists");
  assert.equal(e.name, "ExistsError");
  const x = errorFromErrno({ errno: 22, op: "RTM_NEWROUTE", extack: "Invalid prefix" });
  assert.equal(x.message, "RTM_NEWROUTE: Invalid argument (Invalid prefix)");
  assert.equal(x.extack, "Invalid prefix");
});

Deno.test("errno values map to the typed errors callers branch on", () => {
  const cls = (n: number) => errorFromErrno({ errno: n, op: "x" }).constructor;
  for (const n of [2, 3, 19, 99]) assert.equal(cls(n), NotFoundError, `errno ${n}`);
  assert.equal(cls(17), ExistsError);
  assert.equal(cls(16), BusyError);
  assert.equal(cls(1), PermissionError);
  assert.equal(cls(13), PermissionError);
  assert.equal(cls(22), InvalidError);
  assert.equal(cls(95), InvalidError);
  assert.equal(cls(101), NetlinkError);
  assert.ok(isNotFound(errorFromErrno({ errno: 19, op: "RTM_DELLINK" })));
  assert.ok(!isNotFound(new Error("x")));
  assert.ok(isExists(errorFromErrno({ errno: 17, op: "RTM_NEWRULE" })));
});
