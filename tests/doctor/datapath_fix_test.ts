/**
 * `doctor datapath --fix` on a host netns the test builds by hand, with no daemon: what it
 * may remove depends on knowing the allocations. With a checkpoint it removes vpcni-shaped
 * leftovers and keeps what a checkpointed pod still uses; with neither daemon nor
 * checkpoint it refuses, since every pod would look orphaned.
 *
 * @module
 */
import assert from "node:assert/strict";
import { withNetns } from "../helpers/netns.ts";
import { freePort } from "../helpers/doctor_node.ts";
import { run, sh } from "../helpers/sh.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

async function doctorDatapath(netns: string, stateDir: string, extra: string[]) {
  const dead = `127.0.0.1:${freePort()}`;
  return await run([
    "deno",
    "run",
    "-A",
    "--no-check",
    "--quiet",
    MAIN,
    "doctor",
    "datapath",
    ...extra,
    "--host-netns",
    netns,
    "--daemon",
    dead,
    "--state-dir",
    stateDir,
    "--imds-endpoint",
    `http://${dead}`,
    "--timeout",
    "300",
    "--conflist-file",
    `${stateDir}/none.conflist`,
  ], { env: { ...Deno.env.toObject(), NO_COLOR: "1" } });
}

Deno.test("datapath --fix without daemon: uses the checkpoint, or refuses without one", async () => {
  await withNetns(["vdrh"], async (host) => {
    const state = await Deno.makeTempDir({ prefix: "vdr-fix-" });
    try {
      // A pod's rule (in the checkpoint) and a leftover of a pod that is gone.
      await sh(["ip", "rule", "add", "priority", "1000", "to", "10.70.1.5/32", "lookup", "main"], {
        netns: host.name,
      });
      await sh(["ip", "rule", "add", "priority", "1000", "to", "10.70.1.9/32", "lookup", "main"], {
        netns: host.name,
      });

      const refused = await doctorDatapath(host.path, state, ["--fix"]);
      assert.equal(refused.code, 2, refused.stdout);
      assert.match(
        refused.stderr,
        /refusing --fix: the daemon is not answering[\s\S]* no readable\s+checkpoint/,
      );
      for (const l of refused.stderr.trimEnd().split("\n")) {
        assert.ok(l.length <= 80, `the refusal fits a terminal: ${l.length}: ${l}`);
      }
      let rules = await sh(["ip", "rule"], { netns: host.name });
      assert.match(rules, /10\.70\.1\.5/);
      assert.match(rules, /10\.70\.1\.9/);

      await Deno.writeTextFile(
        `${state}/ipam-checkpoint.json`,
        JSON.stringify({
          version: 1,
          instanceId: "i-0123456789abcdef0",
          savedAt: Date.now(),
          allocations: [{
            network: "vpcni",
            containerId: "c1",
            ifName: "eth0",
            ip: "10.70.1.5",
            eniId: "eni-0123456789abcdef0",
            pool: "default",
            time: Date.now(),
          }],
          cooldowns: [],
        }),
      );
      const fixed = await doctorDatapath(host.path, state, ["--fix"]);
      assert.match(fixed.stderr, /daemon is not answering[\s\S]*reading the\s+checkpoint/);
      assert.match(fixed.stdout, /done: delete rule 1000: to 10\.70\.1\.9\/32 lookup main/);
      rules = await sh(["ip", "rule"], { netns: host.name });
      assert.match(rules, /10\.70\.1\.5/, "the checkpointed pod's rule stays");
      assert.doesNotMatch(rules, /10\.70\.1\.9/);
    } finally {
      await Deno.remove(state, { recursive: true });
    }
  });
});
