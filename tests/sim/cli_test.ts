/**
 * `vpcni sim` as a user runs it: it prints its endpoints, serves EC2 and IMDS until
 * SIGTERM/Ctrl-C, and refuses bad flags and bad scenario files with a pointed message.
 * Every example scenario loads.
 */
import assert from "node:assert/strict";
import { loadScenario } from "../../aws/sim/mod.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const SCENARIOS = `${ROOT}examples/scenarios`;

function vpcni(args: string[]): Deno.Command {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}main.ts`, ...args],
    stdout: "piped",
    stderr: "piped",
  });
}

Deno.test("every example scenario loads", () => {
  const names = [...Deno.readDirSync(SCENARIOS)].map((e) => e.name).filter((n) =>
    /\.(ya?ml|json)$/.test(n)
  );
  assert.ok(names.includes("one-node.yaml") && names.includes("two-node.yaml"), names.join(","));
  for (const n of names) {
    const s = loadScenario(`${SCENARIOS}/${n}`);
    assert.ok(s.instances.length >= 1, n);
  }
  const one = loadScenario(`${SCENARIOS}/one-node.yaml`);
  assert.deepEqual(one.subnets.map((s) => s.tags.zone).sort(), ["internal", "public"]);
  assert.equal(loadScenario(`${SCENARIOS}/two-node.yaml`).instances.length, 2);
});

Deno.test("vpcni sim --json prints endpoints that answer, and stops on SIGTERM", async () => {
  const child = vpcni(["sim", "--scenario", `${SCENARIOS}/two-node.yaml`, "--json"]).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  try {
    let text = "";
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    const info = JSON.parse(text.split("\n")[0]);
    assert.equal(info.region, "us-west-2");
    assert.deepEqual(Object.keys(info.imds).sort(), ["i-0f1e2d3c4b5a60001", "i-0f1e2d3c4b5a60002"]);
    const r = await fetch(info.ec2Endpoint, {
      method: "POST",
      body: new URLSearchParams({ Action: "DescribeVpcs", Version: "2016-11-15" }),
    });
    assert.match(await r.text(), /<vpcId>vpc-0f1e2d3c4b5a60002<\/vpcId>/);
    const tok = await (await fetch(`${info.imds["i-0f1e2d3c4b5a60002"]}/latest/api/token`, {
      method: "PUT",
      headers: { "x-aws-ec2-metadata-token-ttl-seconds": "30" },
    })).text();
    const id =
      await (await fetch(`${info.imds["i-0f1e2d3c4b5a60002"]}/latest/meta-data/instance-id`, {
        headers: { "x-aws-ec2-metadata-token": tok },
      })).text();
    assert.equal(id, "i-0f1e2d3c4b5a60002");
  } finally {
    child.kill("SIGTERM");
    await reader.cancel().catch(() => {});
  }
  const status = await child.status;
  await child.stderr.cancel().catch(() => {});
  assert.equal(status.code, 0);
});

Deno.test("vpcni sim refuses a bad scenario with file:line: field, and a bad --port", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vfb-cli-" });
  try {
    const bad = `${dir}/bad.yaml`;
    await Deno.writeTextFile(
      bad,
      (await Deno.readTextFile(`${SCENARIOS}/one-node.yaml`)).replace(
        "type: m5.large",
        "type: m5.huge",
      ),
    );
    const out = await vpcni(["sim", "--scenario", bad]).output();
    assert.equal(out.code, 2);
    const err = new TextDecoder().decode(out.stderr);
    assert.match(
      err,
      new RegExp(`${bad}:\\d+:\\d+: instances\\[0\\]\\.type: unknown instance type m5\\.huge`),
    );
    const missing = await vpcni(["sim", "--scenario", `${dir}/nope.yaml`]).output();
    assert.equal(missing.code, 2);
    assert.match(
      new TextDecoder().decode(missing.stderr),
      /^vpcni sim: --scenario .*nope\.yaml: cannot read: no such file or directory; pass a scenario/,
    );
    const log = await vpcni([
      "sim",
      "--scenario",
      `${SCENARIOS}/one-node.yaml`,
      "--log",
      `${dir}/no-such-dir/sim.log`,
    ]).output();
    assert.equal(log.code, 2, "an unwritable --log is a usage error");
    assert.match(
      new TextDecoder().decode(log.stderr),
      /^vpcni sim: --log .*\/no-such-dir\/sim\.log: cannot open for appending: no such file/,
    );
    const port = await vpcni(["sim", "--scenario", `${SCENARIOS}/one-node.yaml`, "--port", "http"])
      .output();
    assert.equal(port.code, 2);
    assert.match(new TextDecoder().decode(port.stderr), /--port must be a number/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
