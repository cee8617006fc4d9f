import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { sha1Hex } from "./sha1.ts";

Deno.test("sha1Hex matches the published test vectors", () => {
  assert.equal(sha1Hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  assert.equal(sha1Hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  assert.equal(
    sha1Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
    "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
  );
});

Deno.test("sha1Hex agrees with node:crypto across block boundaries and UTF-8", () => {
  for (let n = 0; n < 200; n++) {
    const s = "é".repeat(n % 7) + "x".repeat(n);
    assert.equal(sha1Hex(s), createHash("sha1").update(s).digest("hex"), `length ${n}`);
  }
});
