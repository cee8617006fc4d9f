import assert from "node:assert/strict";
import { checkConsistency } from "./checks.ts";
import { configViewSchema, type Facts, gatherFacts } from "./facts.ts";

function daemonDownFacts(extra: Partial<Facts>): Facts {
  return {
    source: "checkpoint+kernel",
    notes: [],
    daemon: { reachable: false, healthy: false, ready: false, detail: "down" },
    config: configViewSchema.parse({}),
    pools: [],
    enis: [],
    allocations: [],
    cooldowns: [],
    ...extra,
  };
}

Deno.test("an unreadable checkpoint with the daemon down fails, with the way out", () => {
  const r = checkConsistency(
    daemonDownFacts({
      checkpointError: "checkpoint /var/lib/vpcni/ipam-checkpoint.json is not JSON",
      checkpointCorrupt: true,
    }),
    undefined,
    () => true,
  );
  assert.equal(r.status, "fail");
  assert.match(r.found, /is not JSON; the allocations are unknown/);
  assert.match(r.fix ?? "", /move the file aside, then start the daemon/);
  const absent = checkConsistency(
    daemonDownFacts({ checkpointError: "no checkpoint at /var/lib/vpcni/x" }),
    undefined,
    () => true,
  );
  assert.equal(absent.status, "ok", "a node with no checkpoint yet is not broken");
});

Deno.test("gatherFacts tells a corrupt checkpoint from a missing one", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vqa-cp-" });
  const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (dead.addr as Deno.NetAddr).port;
  dead.close();
  const o = {
    daemonUrl: `http://127.0.0.1:${port}`,
    stateDir: dir,
    conflistFile: `${dir}/none.conflist`,
    binDir: dir,
    imdsEndpoint: `http://127.0.0.1:${port}`,
    kubeletConfig: `${dir}/none.yaml`,
    timeoutMs: 200,
  };
  try {
    assert.equal((await gatherFacts(o)).checkpointCorrupt, undefined);
    await Deno.writeTextFile(`${dir}/ipam-checkpoint.json`, "{bad");
    const f = await gatherFacts(o);
    assert.equal(f.checkpointCorrupt, true);
    assert.match(f.checkpointError ?? "", /ipam-checkpoint\.json cannot be used: not JSON/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
