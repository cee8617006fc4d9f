/**
 * Runs the README's demo command, `tools/dev demo`, the way a new user would on a fresh
 * machine (as root), and checks what it prints and that it leaves nothing behind.
 *
 * @module
 */
import assert from "node:assert/strict";
import { run } from "../helpers/sh.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

async function demoNamespaces(): Promise<string[]> {
  const r = await run(["ip", "netns", "list"]);
  return r.stdout.split("\n").filter((l) => l.startsWith("vpcni-demo-"));
}

Deno.test("the README's demo command adds pods in two pools, connects them, cleans up", async () => {
  const readme = await Deno.readTextFile(`${ROOT}/README.md`);
  // The command runs from a root shell as written; sudo is shown as the alternative.
  const m = /^(bash tools\/dev demo) +# or: sudo bash tools\/dev demo$/m.exec(readme);
  assert.ok(m, "README.md must show the demo command as `bash tools/dev demo`, run as root");
  const before = await demoNamespaces();

  const r = await run(["bash", "tools/dev", "demo", "--pods", "4"], { cwd: ROOT });
  const out = r.stdout;
  assert.equal(r.code, 0, `demo exited ${r.code}:\n${out}\n${r.stderr}`);
  assert.match(
    out,
    /^ +datapath (veth|ipvlan-l2): (this kernel has ipvlan|no ipvlan in this kernel)/m,
  );
  for (const step of [1, 2, 3, 4, 5, 6]) assert.match(out, new RegExp(`^\\[${step}/6\\]`, "m"));

  // Four pods, two per pool, each in its pool's subnet and zone.
  const rows = out.split("\n").filter((l) => /^pod-\d+\s/.test(l)).map((l) =>
    l.trim().split(/\s+/)
  );
  assert.equal(rows.length, 4, out);
  for (const [, pool, ip, eni, , cidr, zone] of rows) {
    assert.equal(zone, pool, `pod in pool ${pool} got a ${zone} subnet`);
    assert.match(eni, /^eni-[0-9a-f]+$/);
    assert.equal(cidr, pool === "public" ? "10.42.16.0/20" : "10.42.32.0/20");
    const prefix = pool === "public" ? "10.42.16." : "10.42.32.";
    assert.ok(ip.startsWith(prefix), `${ip} not in ${cidr}`);
  }
  for (const line of out.split("\n")) {
    assert.ok(line.length <= 80, `demo output wider than 80 columns: ${line}`);
  }
  const ips = rows.map((r) => r[2]);
  assert.equal(new Set(ips).size, ips.length, `an address was handed out twice: ${ips}`);

  assert.doesNotMatch(out, /FAIL/);
  assert.match(out, /4\/4 pods deleted/);
  assert.match(out, /demo: all pods got VPC addresses and could talk/);
  assert.deepEqual(await demoNamespaces(), before, "the demo left namespaces behind");
});

Deno.test("demo refuses a bad flag before touching anything", async () => {
  const before = await demoNamespaces();
  for (
    const [args, message] of [
      [["--pods", "1"], /--pods 1: give a whole number from 2 to 40/],
      [["--datapath", "vxlan"], /--datapath vxlan: choose one of auto, veth/],
      [["--instance-type", "M5.Large"], /--instance-type M5.Large: .*did you mean m5.large\?/],
    ] as const
  ) {
    const r = await run(["deno", "run", "-A", "--no-check", "main.ts", "demo", ...args], {
      cwd: ROOT,
    });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, message);
    assert.equal(r.stdout, "");
  }
  assert.deepEqual(await demoNamespaces(), before);
});
