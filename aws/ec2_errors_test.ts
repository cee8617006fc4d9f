import assert from "node:assert/strict";
import { Ec2Error, toEc2Error } from "./ec2_errors.ts";

// The SDK's error objects are built by hand here: these are its documented shapes, and the
// network failures (ECONNRESET in the middle of a response) cannot be caused on demand.

Deno.test("toEc2Error: an EC2 service error keeps its code, request id and status", () => {
  const sdkErr = Object.assign(new Error("The subnet ID 'subnet-1' does not exist"), {
    name: "InvalidSubnetID.NotFound",
    $metadata: { httpStatusCode: 400, requestId: "req-1" },
  });
  const e = toEc2Error("CreateNetworkInterface", sdkErr, "http://x");
  assert.ok(e instanceof Ec2Error);
  assert.equal(e.code, "InvalidSubnetID.NotFound");
  assert.equal(e.requestId, "req-1");
  assert.equal(e.httpStatus, 400);
  assert.equal(e.action, "CreateNetworkInterface");
  assert.match(e.message, /^EC2 CreateNetworkInterface failed: InvalidSubnetID.NotFound: /);
  assert.equal(e.cause, sdkErr);
});

Deno.test("toEc2Error: network failures name the endpoint", () => {
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), {
    code: "ECONNREFUSED",
  });
  const e = toEc2Error("DescribeVpcs", refused, "http://127.0.0.1:9");
  assert.equal(e.code, "EndpointUnreachable");
  assert.match(e.message, /cannot reach http:\/\/127\.0\.0\.1:9/);
  const reset = toEc2Error(
    "DescribeVpcs",
    new Error("socket hang up", {
      cause: Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }),
    }),
    "http://h",
  );
  assert.equal(reset.code, "NetworkError");
  const timeout = Object.assign(new Error("no answer"), { name: "TimeoutError" });
  assert.equal(toEc2Error("DescribeVpcs", timeout, "http://h").code, "Timeout");
});

Deno.test("toEc2Error: an unparseable 5xx is an InternalError with its status", () => {
  const e = toEc2Error(
    "DescribeVpcs",
    Object.assign(new Error("UnknownError"), {
      name: "Unknown",
      $metadata: { httpStatusCode: 502 },
    }),
    "http://h",
  );
  assert.equal(e.code, "InternalError");
  assert.equal(e.httpStatus, 502);
});
