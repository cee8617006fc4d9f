import assert from "node:assert/strict";
import { redactJson, redactText, writeBundle } from "./bundle.ts";

Deno.test("access keys, secret keys, tokens and passwords are redacted from text", () => {
  const t = redactText(
    "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n" +
      'X-aws-ec2-metadata-token: AQAEAbcdef==\n{"password":"hunter2"}\nsubnet-0123 10.0.0.0/24',
  );
  assert.doesNotMatch(t, /AKIAIOSFODNN7EXAMPLE|wJalrXUtnFEMI|AQAEAbcdef|hunter2/);
  assert.match(t, /subnet-0123 10\.0\.0\.0\/24/, "ordinary facts stay");
});

Deno.test("secret-looking keys are redacted in JSON at any depth; other values stay", () => {
  const v = redactJson({
    environment: {
      AWS_SECRET_ACCESS_KEY: "abc",
      AWS_SESSION_TOKEN: "def",
      AWS_REGION: "us-east-1",
    },
    pools: [{ name: "default", free: 3 }],
  }) as Record<string, Record<string, unknown>>;
  assert.equal(v.environment.AWS_SECRET_ACCESS_KEY, "[redacted]");
  assert.equal(v.environment.AWS_SESSION_TOKEN, "[redacted]");
  assert.equal(v.environment.AWS_REGION, "us-east-1");
  assert.deepEqual(v.pools, [{ name: "default", free: 3 }]);
});

Deno.test("a bundle that cannot be renamed into place leaves no temp file behind", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vqa-bundle-" });
  try {
    await Deno.mkdir(`${dir}/taken`);
    await assert.rejects(writeBundle(`${dir}/taken`, [{ name: "a.txt", data: "a\n" }]));
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["taken"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
