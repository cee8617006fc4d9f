/**
 * The guards of the release of pods gone without a DEL the daemon heard, against the
 * in-memory cloud and a kernel the test describes: what may free an address, and what must
 * never (a netns never seen, a host rule still there, a young reservation, a record older
 * than the ADD it would hit). The whole story on a real node is tests/cni/del_while_down_test.ts.
 */
import assert from "node:assert/strict";
import type { KernelView } from "./kernel_view.ts";
import { type GoneReason, goneReleaser, SWEEP_GRACE_MS } from "./gone_pods.ts";
import { delRecordDir, parseDelRecord, writeDelRecord } from "../proto/del_records.ts";
import { addOf, keyOf, MemoryCloud, memoryNode } from "../tests/helpers/memory_cloud.ts";

const POOLS = { pools: [{ name: "default", warmEnis: 0, warmIps: 0, ipCooldownSeconds: 0 }] };

/** A kernel where `alive` netns exist, `unseen` cannot be told about, `ruled` have rules. */
function kernel(k: { alive: Set<string>; unseen: Set<string>; ruled: Set<string> }): KernelView {
  return {
    podAlive: ({ netns }) =>
      Promise.resolve(
        netns === undefined || k.unseen.has(netns) ? undefined : k.alive.has(netns),
      ),
    routedPodIps: () => Promise.resolve(undefined),
    ruledPodIps: () => Promise.resolve(new Set(k.ruled)),
  };
}

Deno.test("sweep: only a reservation whose netns was seen, is gone, and lost its rule goes", async () => {
  const k = { alive: new Set<string>(), unseen: new Set<string>(), ruled: new Set<string>() };
  const node = await memoryNode(new MemoryCloud({ maxEnis: 3, ipv4PerEni: 8 }), {
    config: POOLS,
    kernel: kernel(k),
  });
  const ip: Record<string, string> = {};
  for (const p of ["gone", "ruled", "unseen", "live"]) {
    const r = await node.pools.add(addOf(p));
    assert.ok(r.ok && "allocation" in r);
    ip[p] = r.allocation.ip;
    k.alive.add(`/run/netns/${p}`);
  }
  const counted: GoneReason[] = [];
  const releaser = goneReleaser({
    pools: node.pools,
    kernel: kernel(k),
    socketPath: "/nonexistent/ipam.sock",
    now: () => node.clock.now,
    count: (reason) => counted.push(reason),
  });
  await releaser.releaseAll(); // every netns is seen alive once
  node.clock.now += SWEEP_GRACE_MS + 1;
  const late = await node.pools.add(addOf("late")); // seen, but too young to sweep
  assert.ok(late.ok);
  await releaser.releaseAll();

  // Now the netns of all but "live" go; "ruled" keeps its host rule (its DEL is to come),
  // "unseen" becomes a path the daemon cannot tell about.
  for (const p of ["gone", "ruled", "late"]) k.alive.delete(`/run/netns/${p}`);
  k.ruled.add(ip.ruled);
  k.unseen.add("/run/netns/unseen");
  await releaser.releaseAll();
  assert.equal(node.pools.check(keyOf("gone")), undefined, "netns and rule gone: released");
  assert.equal(node.pools.check(keyOf("ruled"))?.ip, ip.ruled, "its rule is there: kept");
  assert.equal(node.pools.check(keyOf("unseen"))?.ip, ip.unseen, "cannot tell: kept");
  assert.equal(node.pools.check(keyOf("live"))?.ip, ip.live, "a live pod keeps its address");
  assert.ok(node.pools.check(keyOf("late")), "younger than the grace: kept");
  assert.deepEqual(counted, ["pod-gone"]);
  assert.ok(!node.disk()!.allocations.some((a) => a.ip === ip.gone), "the release is saved");

  // A netns that never was seen alive is never "gone", however old.
  const never = await memoryNode(new MemoryCloud({ maxEnis: 3, ipv4PerEni: 8 }), {
    config: POOLS,
    kernel: kernel(k),
  });
  assert.ok((await never.pools.add(addOf("ghost"))).ok);
  const r2 = goneReleaser({
    pools: never.pools,
    kernel: kernel(k),
    socketPath: "/nonexistent/ipam.sock",
    now: () => never.clock.now,
    count: () => {},
  });
  never.clock.now += 10 * SWEEP_GRACE_MS;
  await r2.releaseAll();
  assert.ok(never.pools.check(keyOf("ghost")), "a netns path never seen frees nothing");
});

Deno.test("DEL records: released unless an ADD came after; unreadable ones set aside", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-records-" });
  const socketPath = `${dir}/ipam.sock`;
  try {
    const node = await memoryNode(new MemoryCloud({ maxEnis: 3, ipv4PerEni: 8 }), {
      config: POOLS,
    });
    for (const p of ["deleted", "readded"]) assert.ok((await node.pools.add(addOf(p))).ok);
    const t = node.clock.now;
    const rec = (name: string, time: number) => ({
      version: 1 as const,
      network: "vpcni",
      containerId: `c-${name}`,
      ifName: "eth0",
      time,
    });
    await writeDelRecord(socketPath, rec("deleted", t + 5));
    await writeDelRecord(socketPath, rec("readded", t - 5)); // a DEL before this ADD
    await writeDelRecord(socketPath, rec("unknown", t + 5)); // nothing held: nothing to do
    await Deno.writeTextFile(`${delRecordDir(socketPath)}/9-junk.json`, "{not json");
    const releaser = goneReleaser({
      pools: node.pools,
      kernel: kernel({ alive: new Set(), unseen: new Set(), ruled: new Set() }),
      socketPath,
      now: () => node.clock.now,
      count: () => {},
    });
    assert.equal(await releaser.releaseRecorded(), 1);
    assert.equal(node.pools.check(keyOf("deleted")), undefined);
    assert.ok(node.pools.check(keyOf("readded")), "the ADD after the DEL keeps its address");
    const left = [];
    for await (const e of Deno.readDir(delRecordDir(socketPath))) left.push(e.name);
    assert.deepEqual(left, ["9-junk.json.bad"], "records removed, the unreadable one set aside");
    assert.equal((await Deno.stat(delRecordDir(socketPath))).mode! & 0o777, 0o700);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("DEL records: the parser names what is wrong", () => {
  const ok = { version: 1, network: "n", containerId: "c", ifName: "eth0", time: 1 };
  assert.deepEqual(parseDelRecord(JSON.stringify(ok)), ok);
  for (
    const [bad, why] of [
      [{ ...ok, version: 2 }, /version 2/],
      [{ ...ok, containerId: "" }, /containerId/],
      [{ ...ok, time: -1 }, /time/],
      [{ ...ok, netns: 7 }, /netns/],
      [[ok], /not an object/],
    ] as const
  ) assert.throws(() => parseDelRecord(JSON.stringify(bad)), why);
});
