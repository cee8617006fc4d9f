/**
 * `vpcni doctor` against what others put on a node, tried as an attacker would: pods whose
 * netns is a FIFO, a regular file or /dev/null (the IPAM role takes any netns path), a FIFO
 * as a plugin's log file, pod names and namespaces holding terminal escape sequences, and
 * credentials planted in the logs, configs, environment and pod names a bundle copies.
 * Doctor runs as the CLI with the build's permissions, against the real `vpcni serve` on
 * the simulator: it never hangs, never prints a control character raw, and its bundle holds
 * none of the planted credentials.
 *
 * @module
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { INSTANCE, ipamClient, standardScenario, tempRoot } from "../ipam/harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "../ipam/daemon_process.ts";
import { COMPILE_PERMISSIONS } from "../../tools/compile.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
/** Longest any doctor run may take here; a hang on a FIFO would never end. */
const BOUND_MS = 60_000;

/** A pod name as an attacker picks it: colour, bell, newline, carriage return. */
const HOSTILE_NAME = "evil\x1b[31mred\x07\nline2\rcr";
const HOSTILE_NS = "ns\x1b]0;owned\x07\u202e";

/** 40 base64 characters of mixed case and digits: how AWS secret keys look. */
const secret40 = (tag: string) =>
  `wJalrXUtnFEMI/K7MDENG/bPxRfiCY${tag}`.padEnd(40, "Q").slice(0, 40);
/** A base64 run as long as an STS session token. */
const sessionToken = (seed: string) =>
  ("IQoJb3JpZ2luX2VjE" + seed + "A".repeat(20) + "/+Zz9").repeat(12).slice(0, 356) + "==";

/** Every credential planted, by where it was planted. */
const PLANTED = {
  presignedToken: "IQoJb3JpZ2luX2VjEJr%2F%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJHMEUCIQD6pl4nted",
  urlPassword: "hunter2pass",
  secretBeforeComma: secret40("Comma1"),
  secretBeforePeriod: secret40("Period2"),
  secretInParens: secret40("Paren3"),
  bareSessionToken: sessionToken("Bare"),
  /** Cut short by a log line's width: too short for the length rule, known by its start. */
  shortSessionToken: "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDshortPlanted",
  /** After a percent-escaped "=", in a URL-encoded body. */
  encodedSessionToken: sessionToken("Enc"),
  akia: "AKIAIOSFODNN7EXAMPLE",
  asia: "ASIAY34FZKBOKMUTVV7A",
  sigV4Signature: "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
  sigV4KeyId: "AKIAJKLMNOPQRSTUVWXY",
  bearer: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwd24ifQ.c2lnbmF0dXJlLXBsYW50ZWQ",
  iniSecret: secret40("Ini4"),
  dbPassword: "S3cretDbPass",
  imdsToken: "AQAEAHzPlantedImdsTokenValue00000000000000==",
  jsonSecretKey: "9drTJvcXLB89EXAMPLELB8923FB892xMFIplanted",
  jsonToken: sessionToken("Json"),
  yamlPassword: "sup3rs3cretValue",
  amzCredential: "AKIAZZZZZZZZZZZZZZZZ%2F20261201%2Fus-east-1%2Fec2%2Faws4_request",
  configSecret: secret40("Cfg5"),
  configUrlPassword: "DeployPassw0rd",
  conflistPassword: "ConflistPassw0rd",
  envSecret: secret40("Env6"),
  envSessionToken: sessionToken("Env"),
  podNameKeyId: "ASIAQWERTYUIOPASDFGH",
};

function pluginLog(): string {
  const p = PLANTED;
  return [
    `GET https://ec2.us-east-1.amazonaws.com/?Action=DescribeNetworkInterfaces&X-Amz-Security-Token=${p.presignedToken}&X-Amz-Date=20261201T000000Z`,
    `using proxy http://user:${p.urlPassword}@proxy.example:3128/`,
    `keys ${p.secretBeforeComma}, region us-east-1`,
    `rotated to ${p.secretBeforePeriod}.`,
    `old key (${p.secretInParens}) dropped`,
    `session ${p.bareSessionToken}`,
    `refresh failed for ${p.shortSessionToken}`,
    `POST body Action=GetCallerIdentity&SessionToken%3D${p.encodedSessionToken}`,
    `{"level":"info","accessKeyId":"${p.akia}","msg":"credentials from ${p.asia}"}`,
    `Authorization: AWS4-HMAC-SHA256 Credential=${p.sigV4KeyId}/20261201/us-east-1/ec2/aws4_request, SignedHeaders=host;x-amz-date, Signature=${p.sigV4Signature}`,
    `authorization: Bearer ${p.bearer}`,
    `aws_secret_access_key = ${p.iniSecret}`,
    `db postgres://admin:${p.dbPassword}@db:5432/ipam`,
    `X-aws-ec2-metadata-token: ${p.imdsToken}`,
    `{"Code":"Success","SecretAccessKey": "${p.jsonSecretKey}","Token" : "${p.jsonToken}"}`,
    "plain line: pod 10.0.0.5 on eni-0123 in subnet-0a000001",
  ].join("\n") + "\n";
}

function ipamLog(): string {
  return [
    `password: ${PLANTED.yamlPassword}`,
    `presigned ...&X-Amz-Credential=${PLANTED.amzCredential}&X-Amz-Expires=60`,
  ].join("\n") + "\n";
}

/** Runs doctor with the build's permissions; killed (and so failed) past {@linkcode BOUND_MS}. */
async function doctor(args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", ...COMPILE_PERMISSIONS, "--no-check", "--quiet", MAIN, "doctor", ...args],
    env: { ...Deno.env.toObject(), NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(BOUND_MS),
  }).output();
  return {
    code: out.code,
    signal: out.signal,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}

/** Control characters other than the newline that ends a line (and the tab). */
// deno-lint-ignore no-control-regex -- finding controls is the point
const RAW_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/;

Deno.test("doctor with FIFO netns, hostile pod names and planted credentials: bounded, escaped, redacted", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const port = randomPort();
  const config = await writeChildConfig(root, sim, port, {
    pools: [{ name: "default", warmIps: 4, warmEnis: 0 }],
  });
  // Credentials in comments of the daemon's config file, which the bundle copies.
  await Deno.writeTextFile(
    config,
    `# aws_secret_access_key: ${PLANTED.configSecret}\n` +
      `# mirror https://deploy:${PLANTED.configUrlPassword}@git.example/repo\n` +
      await Deno.readTextFile(config),
  );
  const daemon = spawnDaemon(root, config, port);
  try {
    await daemon.ready();
    const fifo = `${root}/netns-fifo`;
    const logFifo = `${root}/log-fifo`;
    for (const f of [fifo, logFifo]) {
      assert.ok((await new Deno.Command("mkfifo", { args: [f] }).output()).success);
    }
    await Deno.writeTextFile(`${root}/netns-file`, "not a namespace\n");
    const pods: [string, string, string, string][] = [
      ["c-fifo", fifo, HOSTILE_NS, HOSTILE_NAME],
      ["c-file", `${root}/netns-file`, "default", "regular-file-netns"],
      ["c-null", "/dev/null", "default", "dev-null-netns"],
      ["c-\x1b[2Jclear", "/proc/self/ns/net", "default", PLANTED.podNameKeyId],
    ];
    for (const [containerId, netns, podNamespace, podName] of pods) {
      const r = await ipamClient(`${root}/ipam.sock`).call({
        op: "add",
        network: "vpcni",
        containerId,
        ifName: "eth0",
        netns,
        podNamespace,
        podName,
      });
      assert.ok(r.ok, JSON.stringify(r));
    }
    await Deno.writeTextFile(`${root}/plugin.log`, pluginLog());
    await Deno.writeTextFile(`${root}/ipam.log`, ipamLog());
    const conflist = `${root}/10-vpcni.conflist`;
    await Deno.writeTextFile(
      conflist,
      JSON.stringify({
        cniVersion: "1.1.0",
        name: "vpcni",
        plugins: [
          {
            type: "vpcni",
            logFile: `${root}/plugin.log`,
            proxyUrl: `http://cni:${PLANTED.conflistPassword}@proxy:8080`,
            ipam: { type: "vpcni", logFile: `${root}/ipam.log` },
          },
          { type: "portmap", logFile: logFifo },
        ],
      }),
    );
    const common = [
      "--daemon",
      `127.0.0.1:${port}`,
      "--state-dir",
      `${root}/state`,
      "--config",
      config,
      "--conflist-file",
      conflist,
      "--imds-endpoint",
      sim.imdsEndpointFor(INSTANCE),
      "--ec2-endpoint",
      sim.ec2Endpoint,
      "--region",
      "us-east-1",
    ];

    // doctor pods, text: every name shown, none raw.
    const text = await doctor(["pods", ...common]);
    assert.equal(text.signal, null, "doctor pods hung");
    assert.equal(text.code, 0, text.stderr);
    assert.doesNotMatch(text.stdout, RAW_CONTROL, "no raw control character in the table");
    assert.doesNotMatch(text.stderr, RAW_CONTROL);
    // The POD column is cut to fit 80 columns; what is shown is the escaped text.
    assert.ok(text.stdout.includes("ns\\x1b]0;owned\\"), text.stdout);
    assert.ok(text.stdout.includes("c-\\x1b[2Jclear"), "container ids escaped too");

    // doctor pods --json: the names round-trip exactly, and nothing is raw on the wire.
    const json = await doctor(["pods", "--json", ...common]);
    assert.equal(json.code, 0, json.stderr);
    assert.doesNotMatch(json.stdout, RAW_CONTROL);
    const rows = JSON.parse(json.stdout) as { podName?: string; podNamespace?: string }[];
    const evil = rows.find((r) => r.podName === HOSTILE_NAME);
    assert.ok(evil, "the JSON carries the exact name");
    assert.equal(evil.podNamespace, HOSTILE_NS);

    // The whole report reads every pod's netns: the FIFO, the file and /dev/null are not
    // opened, and nothing is printed raw.
    for (const args of [[...common], ["--json", ...common]]) {
      const r = await doctor(args);
      assert.equal(r.signal, null, `doctor ${args[0]} hung`);
      assert.ok(r.code === 0 || r.code === 1, r.stderr);
      assert.doesNotMatch(r.stdout, RAW_CONTROL);
      assert.doesNotMatch(r.stderr, RAW_CONTROL);
    }

    // The bundle: bounded, and none of the planted credentials anywhere in it.
    const out = `${root}/bundle.tar.gz`;
    const env = {
      AWS_SECRET_ACCESS_KEY: PLANTED.envSecret,
      AWS_SESSION_TOKEN: PLANTED.envSessionToken,
    };
    const b = await doctor(["bundle", "-o", out, ...common], env);
    assert.equal(b.signal, null, "doctor bundle hung");
    assert.equal(b.code, 0, b.stderr);
    const list = new TextDecoder().decode(
      (await new Deno.Command("tar", { args: ["tzf", out], stdout: "piped" }).output()).stdout,
    );
    for (
      const f of [
        "meta.json",
        "config/conflist.json",
        "config/daemon-config.yaml",
        "state/checkpoint.json",
        "daemon/allocations.json",
      ]
    ) assert.ok(list.split("\n").includes(f), `${f} in the bundle:\n${list}`);
    const logs = list.split("\n").filter((n) => n.startsWith("logs/"));
    assert.ok(logs.some((n) => n.endsWith("plugin.log")), list);
    assert.ok(logs.some((n) => n.endsWith("ipam.log")), list);
    assert.ok(logs.some((n) => n.includes("log-fifo") && n.endsWith(".skipped.txt")), list);
    assert.ok(list.includes("kernel/pods/netns-fifo.error.txt"), list);
    const all = new TextDecoder().decode(
      (await new Deno.Command("tar", { args: ["xzOf", out], stdout: "piped" }).output()).stdout,
    );
    assert.ok(all.includes("pod 10.0.0.5 on eni-0123 in subnet-0a000001"), "plain facts stay");
    assert.ok(Object.keys(PLANTED).length >= 20);
    const left = Object.entries(PLANTED).filter(([, v]) => all.includes(v));
    assert.deepEqual(left.map(([k]) => k), [], "credentials left in the bundle");
    for (const re of [/\b(AKIA|ASIA)[0-9A-Z]{16}\b/, /hunter2|Passw0rd|S3cret/]) {
      assert.doesNotMatch(all, re);
    }
  } finally {
    await daemon.stop();
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
