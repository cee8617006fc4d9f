/**
 * The egress knobs as `vpcni serve` reads them: defaults per datapath, and the refusals
 * (SNAT on ipvlan-l2, a bad exclusion) that stop the daemon before it makes anything.
 */
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { poolSnat, resolveConfig } from "../../ipam/config.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

async function serve(configPath: string) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check", MAIN, "serve", "--config", configPath],
    env: { AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("egress config: SNAT to the node by default, except on ipvlan-l2; fully random ports; no exclusions", () => {
  for (
    const [datapath, want] of [["veth", "node"], ["ipvlan-l3s", "node"], ["ipvlan-l2", "none"]]
  ) {
    const cfg = resolveConfig({ datapath, pools: [{ name: "a" }] }, {}, {});
    assert.equal(poolSnat(cfg, cfg.pools[0]), want, datapath);
    assert.deepEqual(cfg.pools[0].snatExcludeCidrs, []);
    assert.equal(cfg.pools[0].snatRandomFully, true);
  }
  const dflt = resolveConfig({ datapath: "veth" }, {}, {});
  assert.equal(poolSnat(dflt, dflt.pools[0]), "node", "the built-in default pool too");
  const off = resolveConfig({ datapath: "veth", pools: [{ name: "a", snat: "none" }] }, {}, {});
  assert.equal(poolSnat(off, off.pools[0]), "none");
});

Deno.test("egress config: snat node on ipvlan-l2 and a bad exclusion refuse start, naming the knob, and make nothing", async () => {
  const root = await Deno.makeTempDir({ prefix: "vpcni-egress-cfg-" });
  try {
    const base = { socketPath: `${root}/ipam.sock`, stateDir: `${root}/state` };
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [
        "SNAT on ipvlan-l2",
        {
          datapath: "ipvlan-l2",
          pools: [{ name: "a", snat: "none" }, { name: "b", snat: "node" }],
        },
        /pools\[1\]\.snat: ipvlan-l2 pods' traffic never reaches the host's netfilter, so the host cannot SNAT it: use datapath ipvlan-l3s or veth, or snat: none with a NAT gateway/,
      ],
      [
        "bad exclusion",
        { datapath: "veth", pools: [{ name: "a", snatExcludeCidrs: ["10.0.0.0/8", "on-prem"] }] },
        /pools\[0\]\.snatExcludeCidrs\[1\]: must be an IPv4 CIDR/,
      ],
      [
        "bad snat value",
        { datapath: "veth", pools: [{ name: "a", snat: "masquerade" }] },
        /pools\[0\]\.snat: must be one of node, none; got "masquerade"/,
      ],
    ];
    for (const [what, knobs, want] of cases) {
      const path = `${root}/bad.yaml`;
      await Deno.writeTextFile(path, stringify({ ...base, ...knobs }));
      const r = await serve(path);
      assert.equal(r.code, 2, `${what}: exit code\n${r.stderr}`);
      assert.match(r.stderr, want, what);
      assert.equal(await Deno.stat(`${root}/ipam.sock`).then(() => true, () => false), false);
      assert.equal(await Deno.stat(`${root}/state`).then(() => true, () => false), false);
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
