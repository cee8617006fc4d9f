import assert from "node:assert/strict";
import {
  CHECKPOINT_FILE,
  CheckpointWriter,
  readCheckpoint,
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
    await Deno.writeTextFile(`${dir}/${CHECKPOINT_FILE}`, JSON.stringify({ ...doc, version: 2 }));
    await assert.rejects(readCheckpoint(dir), /schema version 2, this daemon reads 1/);
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
