/**
 * Bad configuration: `vpcni serve` names every invalid knob and refuses to start — it
 * creates no socket and no state — both for knobs wrong on their own and for knobs that
 * are only wrong against the VPC (checked through EC2 at start).
 */
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { startSim } from "../../aws/sim/mod.ts";
import { INSTANCE, standardScenario, tempRoot } from "./harness.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

async function serve(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check", MAIN, "serve", ...args],
    env: { AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    stderr: new TextDecoder().decode(out.stderr),
    stdout: new TextDecoder().decode(out.stdout),
  };
}

const exists = (p: string) => Deno.stat(p).then(() => true, () => false);

Deno.test("bad config: each invalid knob is named and nothing starts", async () => {
  const root = await tempRoot();
  try {
    const base = { socketPath: `${root}/ipam.sock`, stateDir: `${root}/state` };
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["unknown top-level knob", { colour: 1 }, /unknown knob\(s\): colour/],
      ["bad datapath", { datapath: "vxlan" }, /datapath: Invalid option/],
      ["non-loopback listen", { listen: "0.0.0.0:61679" }, /listen: must be a loopback address/],
      ["relative socket", { socketPath: "x.sock" }, /socketPath: .*must start with "\/"/],
      ["bad pool name", { pools: [{ name: "Pods!" }] }, /pools\[0\]\.name: must be a DNS label/],
      [
        "bad selector",
        { pools: [{ name: "a", subnets: { tags: "zone in (a" } }] },
        /pools\[0\]\.subnets\.tags: expected "," or "\)"/,
      ],
      ["negative warm", { pools: [{ name: "a", warmIps: -1 }] }, /pools\[0\]\.warmIps/],
      [
        "unknown pool knob",
        { pools: [{ name: "a", warmIP: 3 }] },
        /pools\[0\]: unknown knob\(s\): warmIP/,
      ],
      [
        "bad sg id",
        { pools: [{ name: "a", securityGroups: { ids: ["default"] } }] },
        /pools\[0\]\.securityGroups\.ids\[0\]/,
      ],
      [
        "duplicate pools",
        { pools: [{ name: "a" }, { name: "a" }] },
        /pools\[1\]\.name: duplicate pool name "a"/,
      ],
      [
        "unknown default pool",
        { defaultPool: "b", pools: [{ name: "a" }] },
        /defaultPool: no pool named "b"/,
      ],
      ["bad endpoint", { ec2Endpoint: "ftp://x" }, /ec2Endpoint/],
    ];
    for (const [what, knobs, want] of cases) {
      const path = `${root}/bad.yaml`;
      await Deno.writeTextFile(path, stringify({ ...base, ...knobs }));
      const r = await serve(["--config", path]);
      assert.equal(r.code, 2, `${what}: exit code\n${r.stderr}`);
      assert.match(r.stderr, want, what);
      assert.match(r.stderr, /did not start/, what);
      assert.equal(await exists(`${root}/ipam.sock`), false, `${what}: no socket`);
      assert.equal(await exists(`${root}/state`), false, `${what}: no state dir`);
    }
    // Flags and env are checked the same way.
    const flag = await serve(["--listen", "10.1.2.3:80"]);
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /listen: must be a loopback/);
    const env = await serve(["--check-config"], { VPCNI_LOG_LEVEL: "loud" });
    assert.equal(env.code, 2);
    assert.match(env.stderr, /logLevel: Invalid option/);
    const yaml = await serve(["--config", `${root}/nope.yaml`]);
    assert.equal(yaml.code, 2);
    assert.match(yaml.stderr, /nope\.yaml.*cannot read --config file/s);
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("bad config: knobs wrong against the VPC refuse start, naming the knob", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  try {
    const base = {
      socketPath: `${root}/ipam.sock`,
      stateDir: `${root}/state`,
      listen: "127.0.0.1:0",
      ec2Endpoint: sim.ec2Endpoint,
      imdsEndpoint: sim.imdsEndpointFor(INSTANCE),
    };
    const cases: [string, unknown[], RegExp][] = [
      [
        "selector matches nothing",
        [{ name: "a", subnets: { tags: "zone=nowhere" } }],
        /pools\[0\]\.subnets: matches no subnet in us-east-1a/,
      ],
      [
        "subnet only in another AZ",
        [{ name: "a", subnets: { ids: ["subnet-0b000001"] } }],
        /pools\[0\]\.subnets: matches no subnet/,
      ],
      [
        "unknown security group",
        [{ name: "a", securityGroups: { ids: ["sg-0dead"] } }],
        /pools\[0\]\.securityGroups: no such security group sg-0dead/,
      ],
      ["sg selector matches nothing", [{ name: "a" }, {
        name: "b",
        securityGroups: { tags: "role=db" },
      }], /pools\[1\]\.securityGroups: tag selector "role=db" matches no group/],
      [
        "first index past the limit",
        [{ name: "a", firstInterfaceIndex: 4 }],
        /pools\[0\]\.firstInterfaceIndex: 4 is not below the instance's 4 ENIs/,
      ],
    ];
    for (const [what, pools, want] of cases) {
      const path = `${root}/bad.yaml`;
      await Deno.writeTextFile(path, stringify({ ...base, pools }));
      const r = await serve(["--config", path]);
      assert.equal(r.code, 2, `${what}: exit code\n${r.stderr}`);
      assert.match(r.stderr, want, what);
      assert.equal(await exists(`${root}/ipam.sock`), false, `${what}: no socket`);
    }
    const created = [...sim.state.enis.values()].filter((e) => e.tags.has("vpcni.io/cluster"));
    assert.equal(created.length, 0, "a refused start touched nothing in EC2");
  } finally {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
