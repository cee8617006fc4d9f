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

Deno.test("redaction: presigned tokens, URL passwords, secrets before punctuation, bare tokens, headers", () => {
  const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEK1";
  const token = "IQoJb3JpZ2luX2VjE" + "Ab1/+".repeat(60) + "==";
  const cases = [
    `GET /?Action=X&X-Amz-Security-Token=IQoJb3JpZ2lu%2FabcPLANT1&X-Amz-Date=1`,
    `X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F2026PLANT2&X-Amz-Signature=abcdef0123PLANT3`,
    `proxy http://user:PLANT4pass@proxy:3128/ and postgres://a:PLANT5@db/x`,
    `${secret}, then ${secret}. and (${secret}) and ${secret};`,
    `session ${token} end`,
    `Authorization: AWS4-HMAC-SHA256 Credential=AKIAZZZZZZZZZZZZZZZZ/x, Signature=PLANT6sig`,
    `authorization: Bearer PLANT7bearer.token`,
    `aws_secret_access_key = ${secret}`,
    `password: PLANT8`,
    `{"SecretAccessKey": "PLANT9value", "Token" : "PLANT10value"}`,
    `keys ASIAY34FZKBOKMUTVV7A and AKIAIOSFODNN7EXAMPLE`,
  ].join("\n");
  const out = redactText(cases);
  assert.doesNotMatch(out, /PLANT|AKIA|ASIA|wJalrXUtnFEMI|IQoJb3JpZ2lu/, out);
  for (
    const keep of ["subnet-0a000001 10.0.0.0/24", "git 3f786850e387550fdab836ed7e6dc881de23001b"]
  ) {
    assert.equal(redactText(keep), keep, "ordinary facts (ids, lowercase hashes) stay");
  }
});

Deno.test("redaction: an STS session token is hidden whatever its length, encoding or neighbours", () => {
  // As STS hands them out: a regional token and an older global one, then the forms a log or a
  // copied command line gives them.
  const regional = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD6" +
    "x9Kq3LmNpR7sT2vW4yZ/+aBcDeFgHiJk".repeat(20) + "==";
  const global = "FwoGZXIvYXdzEBYaDHQaLm9pR7sT2vW4yZ+aBcDeFgHi" + "Lm9pR7sT2vW4yZ+aB".repeat(14);
  const forms = [
    `AWS_SESSION_TOKEN=${regional}`,
    `"SessionToken": "${regional}"`,
    `aws_session_token = ${global}`,
    `session ${regional.slice(0, 90)}`,
    `session ${global.slice(0, 60)}`,
    `body Action=AssumeRole&x%3D${regional}`,
    `SessionToken%22%3A%22${regional}%22`,
    `{"msg":"{\\"t\\":\\"${regional.replaceAll("/", "\\/")}\\"}"}`,
    `url-safe ${regional.replaceAll("/", "_").replaceAll("+", "-")}`,
    `wrapped\n${regional.match(/.{1,76}/g)!.join("\n")}`,
  ];
  for (const form of forms) {
    const out = redactText(form);
    assert.doesNotMatch(out, /IQoJb3JpZ2lu|FwoGZXIvYXdz/, out);
    // Nothing of the token is left that is long enough to matter.
    for (const t of [regional, global]) {
      for (let i = 0; i + 16 <= t.length; i += 8) {
        assert.ok(!out.includes(t.slice(i, i + 16)), `${out}\nstill holds ${t.slice(i, i + 16)}`);
      }
    }
  }
  const keep = "pod kube-system/coredns-5d78c9869d-abcde on eni-0123456789abcdef0";
  assert.equal(redactText(keep), keep, "names and ids stay");
});
