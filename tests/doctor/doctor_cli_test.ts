/**
 * `vpcni doctor` flags as an on-call engineer mistypes them: each mistake exits 2 at once,
 * names the flag and the fix, fits a terminal, and writes nothing. No daemon, IMDS or EC2
 * is needed: every endpoint points at a closed loopback port.
 *
 * @module
 */
import assert from "node:assert/strict";
import { freePort } from "../helpers/aws_peers.ts";
import { run } from "../helpers/sh.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** `vpcni doctor <safe endpoints> ...args`: flags in `args` come later, so they win. */
async function doctor(args: string[], stateDir: string) {
  const dead = `127.0.0.1:${freePort()}`;
  return await run([
    "deno",
    "run",
    "-A",
    "--quiet",
    MAIN,
    "doctor",
    "--daemon",
    dead,
    "--state-dir",
    stateDir,
    "--imds-endpoint",
    `http://${dead}`,
    "--ec2-endpoint",
    `http://${dead}`,
    "--region",
    "us-east-1",
    "--timeout",
    "200",
    ...args,
  ], { env: { ...Deno.env.toObject(), NO_COLOR: "1" } });
}

function listDir(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).sort();
}

Deno.test("doctor bundle refuses an -o it cannot write, before gathering, leaving nothing", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vqa-bundle-" });
  try {
    Deno.mkdirSync(`${dir}/out`);
    const cases: [string, RegExp][] = [
      [
        `${dir}/no-such-dir/b.tar.gz`,
        /^vpcni doctor: -o\/--output: .*\/no-such-dir is not an existing directory; create it/,
      ],
      [
        `${dir}/out`,
        /^vpcni doctor: -o\/--output: .*\/out is a directory; name a file, e\.g\. -o .*\/out\/vpcni-bundle\.tar\.gz/,
      ],
    ];
    for (const [output, message] of cases) {
      const r = await doctor(["bundle", "-o", output], dir);
      assert.equal(r.code, 2, `${output}: ${r.stderr}`);
      assert.equal(r.stdout, "");
      assert.match(r.stderr.replace(/\s+/g, " "), message);
      for (const l of r.stderr.trimEnd().split("\n")) assert.ok(l.length <= 80, l);
    }
    assert.deepEqual(listDir(dir), ["out"], "no temp file or bundle was left behind");
    assert.deepEqual(listDir(`${dir}/out`), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("doctor's bad flags and missing files exit 2 naming the flag, in JSON mode too", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vqa-doctor-" });
  try {
    const cases: [string[], RegExp][] = [
      [["--kubelet-max-pods", "many"], /--kubelet-max-pods: "many" must be a whole number/],
      [
        ["pods", "--json", "--daemon", "http://[bad"],
        /--daemon: "http:\/\/\[bad" is not host:port/,
      ],
      [
        ["pods", "--config", "/nonexistent/vpcni.yaml"],
        /--config \/nonexistent\/vpcni\.yaml: no such file; name the daemon's config/,
      ],
      [
        ["datapath", "--host-netns", "/var/run/netns/vqa-none"],
        /--host-netns \/var\/run\/netns\/vqa-none: no such file; give a netns file/,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await doctor(args, dir);
      assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
      assert.equal(r.stdout, "", "nothing on stdout, not even half a JSON document");
      assert.match(r.stderr.replace(/\s+/g, " "), message);
    }
    assert.deepEqual(listDir(dir), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
