/**
 * A checkpoint the daemon would never write, as a hand edit or another tool leaves it: one
 * attachment named twice with two addresses, and a cooldown until the year 3000. The real
 * `vpcni serve` logs a warning naming both addresses, keeps one by the documented rule,
 * cools the other down (never frees it at once, never drops it silently), and cuts the
 * cooldown to the documented maximum with a log line.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { ipamClient, standardScenario, tempRoot } from "./harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "./daemon_process.ts";
import { type Checkpoint, CHECKPOINT_FILE } from "../../ipam/checkpoint.ts";
import type { IpamResponse } from "../../proto/ipam.ts";

const HOUR_MS = 3600_000;

function ipOf(r: IpamResponse): string {
  assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
  return r.allocation.ip;
}

Deno.test("checkpoint: an attachment named twice is logged and resolved; a far cooldown is cut", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const port = randomPort();
  const pools = [{ name: "default", warmIps: 6, warmEnis: 0, ipCooldownSeconds: 30 }];
  const config = await writeChildConfig(root, sim, port, {
    pools,
    releaseDelaySeconds: 3600, // the surplus stays put: every address keeps its ENI
  });
  const sock = `${root}/ipam.sock`;
  const cpPath = `${root}/state/${CHECKPOINT_FILE}`;
  try {
    const first = spawnDaemon(root, config, port);
    let ipA: string, ipB: string, ipFree: string;
    try {
      await first.ready();
      // Pods whose netns exists (this process's), so the restart keeps them as live.
      const add = (id: string) =>
        ipamClient(sock).call({
          op: "add",
          network: "vpcni",
          containerId: id,
          ifName: "eth0",
          netns: "/proc/self/ns/net",
          podNamespace: "default",
          podName: id,
        });
      ipA = ipOf(await add("c-a"));
      ipB = ipOf(await add("c-b"));
      ipFree = ipOf(await add("c-c"));
      const del = await ipamClient(sock).call({
        op: "del",
        network: "vpcni",
        containerId: "c-c",
        ifName: "eth0",
      });
      assert.ok(del.ok);
    } finally {
      assert.equal(await first.stop(), 0);
    }

    // The hand edit: c-b's record renamed to c-a (newer ADD), ipFree cooling until 3000.
    const cp = JSON.parse(await Deno.readTextFile(cpPath)) as Checkpoint;
    const a = cp.allocations.find((x) => x.containerId === "c-a")!;
    const b = cp.allocations.find((x) => x.containerId === "c-b")!;
    b.containerId = "c-a";
    b.time = a.time + 1000;
    const year3000 = Date.UTC(3000, 0, 1);
    cp.cooldowns = [{ ip: ipFree, eniId: a.eniId, until: year3000 }];
    await Deno.writeTextFile(cpPath, JSON.stringify(cp));

    const started = Date.now();
    const second = spawnDaemon(root, config, port);
    try {
      await second.ready();
      const log = await Deno.readTextFile(`${root}/daemon.log`);
      const lines = log.split("\n").filter((l) => l.includes('"level":"WARN'));
      const dup = lines.find((l) => l.includes("names attachment vpcni/c-a/eth0 2 times"));
      assert.ok(dup, `a warning names the attachment:\n${lines.join("\n")}`);
      assert.ok(dup.includes(`${ipA} and ${ipB}`), `it names both addresses: ${dup}`);
      assert.ok(dup.includes(`keeping ${ipB} (the newest ADD)`), dup);
      assert.ok(dup.includes(`${ipA} cools down until`), dup);
      const cut = lines.find((l) => l.includes(`cooldown of ${ipFree} ends 3000-01-01`));
      assert.ok(cut, `a warning names the cut cooldown:\n${lines.join("\n")}`);
      assert.match(cut, /later than now \+ 3600 s .* cut to \d{4}-/);

      const base = `http://127.0.0.1:${port}`;
      const allocations = await (await fetch(`${base}/v1/allocations`)).json() as {
        containerId: string;
        ip: string;
      }[];
      assert.deepEqual(
        allocations.filter((x) => x.containerId === "c-a").map((x) => x.ip),
        [ipB],
        "one address for the attachment",
      );
      const cooldowns = await (await fetch(`${base}/v1/cooldowns`)).json() as {
        ip: string;
        until: number;
      }[];
      const loser = cooldowns.find((c) => c.ip === ipA);
      assert.ok(loser, `${ipA} is cooling down, not free: ${JSON.stringify(cooldowns)}`);
      assert.ok(loser.until <= Date.now() + 30_000, "for its pool's ipCooldownSeconds");
      const far = cooldowns.find((c) => c.ip === ipFree);
      assert.ok(far, `${ipFree} still cools down`);
      assert.ok(far.until >= started + HOUR_MS && far.until <= Date.now() + HOUR_MS, "cut to 1 h");

      // New pods get neither cooling address; the DEL of c-a frees what it holds.
      for (let i = 0; i < 3; i++) {
        const ip = ipOf(
          await ipamClient(sock).call({
            op: "add",
            network: "vpcni",
            containerId: `c-new${i}`,
            ifName: "eth0",
            netns: "/proc/self/ns/net",
          }),
        );
        assert.ok(![ipA, ipB, ipFree].includes(ip), `${ip} was held`);
      }
      const del = await ipamClient(sock).call({
        op: "del",
        network: "vpcni",
        containerId: "c-a",
        ifName: "eth0",
      });
      assert.ok(del.ok && "released" in del, JSON.stringify(del));
      assert.deepEqual(del.released.map((r) => r.ip), [ipB], "the DEL frees what c-a holds");
    } finally {
      await second.stop();
    }
    const after = JSON.parse(await Deno.readTextFile(cpPath)) as Checkpoint;
    assert.ok(
      after.cooldowns.every((c) => c.until <= Date.now() + HOUR_MS),
      "no cooldown beyond the maximum is written back",
    );
  } finally {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
