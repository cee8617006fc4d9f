/**
 * Bad configuration: `vpcni serve` names every invalid knob and refuses to start — it
 * creates no socket and no state — both for knobs wrong on their own and for knobs that
 * are only wrong against the VPC (checked through EC2 at start).
 */
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { startSim } from "../../aws/sim/mod.ts";
import { INSTANCE, standardScenario, startDaemonOn, startStack, tempRoot } from "./harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "./daemon_process.ts";
import { CHECKPOINT_FILE } from "../../ipam/checkpoint.ts";

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
      [
        "bad datapath",
        { datapath: "vxlan" },
        /datapath: must be one of ipvlan-l2, ipvlan-l3s, veth; got "vxlan"/,
      ],
      ["non-loopback listen", { listen: "0.0.0.0:61679" }, /listen: must be a loopback address/],
      ["relative socket", { socketPath: "x.sock" }, /socketPath: must be an absolute path/],
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
    assert.match(
      env.stderr,
      /logLevel: must be one of debug, info, warning, error; got "loud" \(from VPCNI_LOG_LEVEL\)/,
    );
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

Deno.test("bad config: help shows defaults; file errors are one line naming file and fix", async () => {
  const root = await tempRoot();
  try {
    const help = await serve(["--help"]);
    assert.equal(help.code, 0, help.stderr);
    const text = help.stdout.replace(/\s+/g, " ");
    for (
      const want of [
        /--socket <path> .*\(default: \/run\/vpcni\/ipam\.sock\)/,
        /--state-dir <dir> .*\(default: \/var\/lib\/vpcni\)/,
        /--listen <host:port> .*\(default: 127\.0\.0\.1:61679\)/,
        /--datapath <name> .*\(default: ipvlan-l2\)/,
        /--log-level <level> .*\(default: info\)/,
        /--cluster-name <name> .*\(default: vpcni\)/,
      ]
    ) assert.match(text, want);

    // A YAML syntax error: one line, file:line:col, no excerpt.
    const bad = `${root}/bad.yaml`;
    await Deno.writeTextFile(bad, "pools:\n  - name: a\n   warmIps: 3\n");
    const y = await serve(["--config", bad]);
    assert.equal(y.code, 2);
    assert.equal(
      y.stderr.trim().split("\n").length,
      1,
      `one line expected, got:\n${y.stderr}`,
    );
    assert.match(y.stderr, new RegExp(`^vpcni serve: ${bad}:3:1: not valid YAML/JSON: \\S`));

    // A missing file: the path once, and what to do.
    const missing = await serve(["--config", `${root}/nope.yaml`]);
    assert.equal(missing.code, 2);
    assert.equal(
      missing.stderr.trim(),
      `vpcni serve: --config ${root}/nope.yaml: no such file; check the path`,
    );

    // A knob set by a flag is named by the flag; one from the file by its knob.
    const file = `${root}/knobs.yaml`;
    await Deno.writeTextFile(file, stringify({ logLevel: "loud", datapath: "veth" }));
    const f = await serve(["--config", file, "--check-config"]);
    assert.equal(f.code, 2);
    assert.match(
      f.stderr,
      /^ {2}logLevel: must be one of debug, info, warning, error; got "loud"$/m,
    );
    const g = await serve(["--config", file, "--log-level", "shout", "--check-config"]);
    assert.equal(g.code, 2);
    assert.match(
      g.stderr,
      /^ {2}--log-level: must be one of debug, info, warning, error; got "shout"$/m,
    );
    assert.doesNotMatch(g.stderr, /logLevel/);
    const h = await serve(["--socket", "relative.sock", "--check-config"]);
    assert.match(
      h.stderr,
      /--socket: must be an absolute path \(start with "\/"\); got "relative\.sock"/,
    );
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("bad checkpoint: serve refuses, naming file, fault and way out; moved aside it rebuilds from EC2", async () => {
  const stack = await startStack(standardScenario(), {
    pools: [{ name: "default", warmIps: 2, warmEnis: 0 }],
  });
  const { sim, root } = stack;
  const state = `${root}/state`;
  const path = `${state}/${CHECKPOINT_FILE}`;
  let podIp: string;
  try {
    const r = await stack.call({
      op: "add",
      network: "vpcni",
      containerId: "c-before",
      ifName: "eth0",
      netns: "/proc/self/ns/net",
    });
    assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
    podIp = r.allocation.ip;
  } finally {
    await stack.daemon.stop();
  }
  try {
    // A torn checkpoint: the daemon refuses every start, each time saying what to do.
    await Deno.writeTextFile(path, '{"version":1,"instanceId":"i-0a');
    const port = randomPort();
    const child = spawnDaemon(root, await writeChildConfig(root, sim, port, {}), port);
    const code = (await child.child.status).code;
    await child.stop();
    const log = await Deno.readTextFile(`${root}/daemon.log`);
    assert.equal(code, 1, log);
    const said = log.split("\n").find((l) => l.startsWith("vpcni serve: ")) ?? "";
    assert.ok(said.includes(`checkpoint ${path} cannot be used: not JSON (`), said);
    assert.ok(said.includes(`mv ${path} ${path}.bad`), said);
    assert.match(said, /drain the node/);
    assert.equal(
      await Deno.readTextFile(path),
      '{"version":1,"instanceId":"i-0a',
      "file untouched",
    );

    // Moved aside: the daemon starts from EC2 alone. What the message promises: no pod is
    // known, and every address EC2 assigns to the pool's ENIs is free again.
    await Deno.rename(path, `${path}.bad`);
    const d = await startDaemonOn(sim, root, {
      pools: [{ name: "default", warmIps: 2, warmEnis: 0 }],
      releaseDelaySeconds: 3600,
    });
    try {
      const base = `http://127.0.0.1:${d.introspectionAddr.port}`;
      assert.deepEqual(await (await fetch(`${base}/v1/allocations`)).json(), []);
      const enis = await (await fetch(`${base}/v1/enis`)).json() as { ips: string[] }[];
      assert.ok(enis.some((e) => e.ips.includes(podIp)), `${podIp} is held by an ENI`);
      const [pool] = await (await fetch(`${base}/v1/pools`)).json();
      assert.equal(pool.used, 0);
      assert.equal(pool.cooling, 0, "nothing was in cooldown: the address is free at once");
      assert.ok(pool.free >= 3, JSON.stringify(pool));
    } finally {
      await d.stop();
    }
  } finally {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("a newer release's checkpoint: serve refuses, naming file, both versions and the ways out", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const path = `${root}/state/${CHECKPOINT_FILE}`;
  try {
    // As a later release might write it: another version, a field this release does not know.
    const newer = JSON.stringify({
      version: 2,
      instanceId: INSTANCE,
      savedAt: Date.now(),
      allocations: [],
      cooldowns: [],
      prefixDelegations: [],
    });
    await Deno.mkdir(`${root}/state`, { mode: 0o700 });
    await Deno.writeTextFile(path, newer, { mode: 0o600 });
    const port = randomPort();
    const child = spawnDaemon(root, await writeChildConfig(root, sim, port, {}), port);
    const code = (await child.child.status).code;
    await child.stop();
    const log = await Deno.readTextFile(`${root}/daemon.log`);
    assert.equal(code, 1, log);
    const said = log.split("\n").find((l) => l.startsWith("vpcni serve: ")) ?? "";
    assert.ok(
      said.includes(`checkpoint ${path} has schema version 2; this release reads version 1`),
      said,
    );
    assert.match(said, /run the release that wrote it/);
    assert.ok(said.includes(`mv ${path} ${path}.v2`), said);
    assert.match(said, /drain the node/);
    assert.equal(await Deno.readTextFile(path), newer, "the newer release's file is untouched");
    assert.ok(!(await exists(`${root}/ipam.sock`)), "no socket");
  } finally {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
