import assert from "node:assert/strict";
import {
  CHECKPOINT_FILE,
  CheckpointWriter,
  type CooldownRecord,
  hasDuplicateAttachments,
  readCheckpoint,
  repairCheckpoint,
  writeCheckpointAtomic,
} from "./checkpoint.ts";

Deno.test("checkpoint: atomic write, versioned read, refusal of other versions", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vip-cp" });
  try {
    assert.equal(await readCheckpoint(dir), undefined);
    const doc = {
      version: 1 as const,
      instanceId: "i-1",
      savedAt: 5,
      allocations: [{
        network: "n",
        containerId: "c",
        ifName: "eth0",
        ip: "10.0.0.5",
        eniId: "eni-1",
        pool: "default",
        time: 4,
      }],
      cooldowns: [{ ip: "10.0.0.6", eniId: "eni-1", until: 99 }],
    };
    await writeCheckpointAtomic(dir, doc);
    assert.deepEqual(await readCheckpoint(dir), doc);
    assert.equal((await Deno.stat(`${dir}/${CHECKPOINT_FILE}`)).mode! & 0o777, 0o600);
    const names = [...Deno.readDirSync(dir)].map((e) => e.name);
    assert.deepEqual(names, [CHECKPOINT_FILE], "no temp file is left behind");
    // A newer release's checkpoint: refused with both versions and both ways out.
    const path = `${dir}/${CHECKPOINT_FILE}`;
    await Deno.writeTextFile(path, JSON.stringify({ ...doc, version: 2, newField: [] }));
    await assert.rejects(readCheckpoint(dir), (e: Error) => {
      assert.match(e.message, /^checkpoint \S+ has schema version 2; this release reads version 1/);
      assert.ok(e.message.includes(`checkpoint ${path} `), e.message);
      assert.match(e.message, /run the release that wrote it/);
      assert.ok(e.message.includes(`mv ${path} ${path}.v2`), e.message);
      return true;
    });
    // Any other wrong version is a corrupt file, with the corrupt file's way out.
    for (const version of [0, -1, 1.5, "2", null]) {
      await Deno.writeTextFile(path, JSON.stringify({ ...doc, version }));
      await assert.rejects(readCheckpoint(dir), /malformed at version.*mv .*\.json \S+\.bad/s);
    }
    await Deno.writeTextFile(`${dir}/${CHECKPOINT_FILE}`, "{");
    await assert.rejects(readCheckpoint(dir), /not JSON.*mv .*ipam-checkpoint\.json\.bad/s);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("checkpoint: concurrent saves coalesce and each sees its change on disk", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vip-cp" });
  try {
    let n = 0;
    let writes = 0;
    const w = new CheckpointWriter(dir, () => {
      writes++;
      return { version: 1, instanceId: "i", savedAt: n, allocations: [], cooldowns: [] };
    });
    const saves: Promise<void>[] = [];
    for (let i = 1; i <= 50; i++) {
      n = i;
      const mine = i;
      saves.push(
        w.save().then(async () => {
          const cp = await readCheckpoint(dir);
          assert.ok(cp!.savedAt >= mine, `save ${mine} resolved before it was durable`);
        }),
      );
    }
    await Promise.all(saves);
    assert.ok(writes <= 3, `50 saves in one turn took ${writes} writes`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const alloc = (containerId: string, ip: string, time: number) => ({
  network: "vpcni",
  containerId,
  ifName: "eth0",
  ip,
  eniId: "eni-1",
  pool: "default",
  time,
});

const doc = (allocations: ReturnType<typeof alloc>[], cooldowns: CooldownRecord[] = []) => ({
  version: 1 as const,
  instanceId: "i-1",
  savedAt: 0,
  allocations,
  cooldowns,
});

const NOW = Date.UTC(2026, 0, 1);
const ctx = (routed: Set<string> | undefined) => ({
  now: NOW,
  maxCooldownMs: 3600_000,
  cooldownMs: () => 30_000,
  routed,
});

Deno.test("checkpoint repair: an attachment named twice keeps the routed, else the newest address", () => {
  const twice = doc([
    alloc("c", "10.0.0.1", 5),
    alloc("c", "10.0.0.2", 9),
    alloc("d", "10.0.0.3", 1),
  ]);
  assert.ok(hasDuplicateAttachments(twice));

  // Nothing routed: the newest ADD wins; the other cools down, named in one warning.
  const a = repairCheckpoint(twice, ctx(new Set()));
  assert.deepEqual(a.checkpoint.allocations.map((x) => x.ip), ["10.0.0.2", "10.0.0.3"]);
  assert.deepEqual(a.checkpoint.cooldowns, [{
    ip: "10.0.0.1",
    eniId: "eni-1",
    until: NOW + 30_000,
  }]);
  assert.equal(a.warnings.length, 1);
  assert.match(
    a.warnings[0],
    /attachment vpcni\/c\/eth0 2 times, with addresses 10\.0\.0\.1 and 10\.0\.0\.2: keeping 10\.0\.0\.2 \(the newest ADD\); 10\.0\.0\.1 cools down/,
  );

  // The kernel routes the older one: it wins; the newer, unrouted, cools down.
  const b = repairCheckpoint(twice, ctx(new Set(["10.0.0.1"])));
  assert.deepEqual(b.checkpoint.allocations.map((x) => x.ip), ["10.0.0.1", "10.0.0.3"]);
  assert.match(b.warnings[0], /keeping 10\.0\.0\.1 \(the host routes it to a pod\)/);
  assert.deepEqual(b.checkpoint.cooldowns.map((c) => c.ip), ["10.0.0.2"]);

  // Both routed: the newest wins, the other stays held by the kernel backstop (no cooldown).
  const c = repairCheckpoint(twice, ctx(new Set(["10.0.0.1", "10.0.0.2"])));
  assert.deepEqual(c.checkpoint.allocations.map((x) => x.ip), ["10.0.0.2", "10.0.0.3"]);
  assert.deepEqual(c.checkpoint.cooldowns, []);
  assert.match(c.warnings[0], /10\.0\.0\.1 held while the host routes it to a pod/);

  // The kernel cannot be read: the other is held as routed-unknown until it can.
  const d = repairCheckpoint(twice, ctx(undefined));
  assert.deepEqual(d.checkpoint.routedUnknown, ["10.0.0.1"]);
  assert.deepEqual(d.checkpoint.cooldowns, []);

  // Same time: the first in the file wins, whatever the order of the run.
  const tie = repairCheckpoint(
    doc([alloc("c", "10.0.0.7", 5), alloc("c", "10.0.0.6", 5)]),
    ctx(new Set()),
  );
  assert.deepEqual(tie.checkpoint.allocations.map((x) => x.ip), ["10.0.0.7"]);
  assert.match(tie.warnings[0], /\(first in the file\)/);
});

Deno.test("checkpoint repair: cooldowns past now + the maximum are cut, with a warning each", () => {
  const r = repairCheckpoint(
    doc([], [
      { ip: "10.0.0.1", eniId: "eni-1", until: Date.UTC(3000, 0, 1) },
      { ip: "10.0.0.2", eniId: "eni-1", until: NOW + 3600_000 },
      { ip: "10.0.0.3", eniId: "eni-1", until: 1e300 },
    ]),
    ctx(new Set()),
  );
  assert.deepEqual(r.checkpoint.cooldowns.map((c) => c.until), [
    NOW + 3600_000,
    NOW + 3600_000,
    NOW + 3600_000,
  ]);
  assert.equal(r.warnings.length, 2, "the one at the maximum is not touched");
  assert.match(
    r.warnings[0],
    /cooldown of 10\.0\.0\.1 ends 3000-01-01T00:00:00\.000Z, later than now \+ 3600 s/,
  );
  assert.match(r.warnings[1], /cooldown of 10\.0\.0\.3 ends at 1e\+300 ms/);
  assert.deepEqual(repairCheckpoint(doc([alloc("c", "10.0.0.9", 1)]), ctx(new Set())).warnings, []);
});

Deno.test("checkpoint: a FIFO in its place is refused unread, not waited on", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vip-cp" });
  try {
    const made = await new Deno.Command("mkfifo", { args: [`${dir}/${CHECKPOINT_FILE}`] }).output();
    assert.ok(made.success);
    await assert.rejects(readCheckpoint(dir), /cannot be used: not a regular file/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
