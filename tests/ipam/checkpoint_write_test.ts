/**
 * A checkpoint that cannot be written: `vpcni serve` runs in a private mount namespace with a
 * small tmpfs on its state directory, which the test fills (ENOSPC) through
 * /proc/<pid>/root. An ADD then reserves nothing: it fails with code 5 and the address is free
 * in the daemon's memory (/v1), absent from the checkpoint on disk and still assigned in EC2,
 * so a retried ADD gets the same answer instead of "already holds an address" or a success
 * the disk never saw. The final save at shutdown logs its failure.
 */
import assert from "node:assert/strict";
import type { IpamResponse } from "../../proto/ipam.ts";
import { startSim } from "../../aws/sim/mod.ts";
import { addReq, ipamClient, simNodeEnis, standardScenario, tempRoot } from "./harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "./daemon_process.ts";

interface CheckpointDoc {
  allocations: { containerId: string; ip: string }[];
  cooldowns: { ip: string }[];
}

Deno.test("checkpoint write fails: the ADD reserves nothing, memory, disk and EC2 agree", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const stateDir = `${root}/state`;
  await Deno.mkdir(stateDir);
  const port = randomPort();
  const config = await writeChildConfig(root, sim, port, {
    pools: [{ name: "default", warmIps: 4, warmEnis: 0 }],
  });
  // The tmpfs exists only in the daemon's mount namespace; the host's stays untouched.
  const daemon = spawnDaemon(root, config, port, {}, [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "--",
    "sh",
    "-c",
    'mount -t tmpfs -o size=64k vpcni-test-state "$0" && exec "$@"',
    stateDir,
  ]);
  const seen = `/proc/${daemon.child.pid}/root${stateDir}`;
  const client = ipamClient(`${root}/ipam.sock`);
  const v1 = <T>(path: string): Promise<T> =>
    fetch(`http://127.0.0.1:${port}${path}`).then((r) => r.json());
  const onDisk = async (): Promise<CheckpointDoc> =>
    JSON.parse(await Deno.readTextFile(`${seen}/ipam-checkpoint.json`));
  const fill = async () => {
    const chunk = new Uint8Array(1 << 20);
    await assert.rejects(
      Deno.writeFile(`${seen}/filler`, chunk),
      /No space left on device/,
      "the daemon's state tmpfs is full",
    );
  };
  try {
    await daemon.ready();
    const first = await client.call(addReq("w1"));
    assert.ok(first.ok && "allocation" in first, JSON.stringify(first));
    assert.ok((await onDisk()).allocations.some((a) => a.containerId === "c-w1"));

    await fill();
    const failed = await client.call(addReq("w2"));
    assert.ok(!failed.ok, JSON.stringify(failed));
    assert.equal(failed.code, 5, JSON.stringify(failed));
    assert.match(failed.msg, /writing the checkpoint in .*state failed: No space left on device/);
    assert.match(failed.details ?? "", /was not handed out and is free again/);
    const ip = /could not record (\S+) for container c-w2/.exec(failed.msg)?.[1];
    assert.ok(ip, failed.msg);

    // Memory: no allocation, no cooldown; the address is still the pool's.
    const allocations = await v1<{ containerId: string; ip: string }[]>("/v1/allocations");
    assert.deepEqual(allocations.map((a) => a.containerId), ["c-w1"]);
    const cooling = await v1<{ ip: string }[]>("/v1/cooldowns");
    assert.ok(!cooling.some((c) => c.ip === ip), `${ip} is not cooling`);
    const enis = await v1<{ id: string; ips: string[] }[]>("/v1/enis");
    const owner = enis.find((e) => e.ips.includes(ip));
    assert.ok(owner, `${ip} is still on one of the daemon's ENIs`);
    // Disk: the checkpoint never saw it.
    const disk = await onDisk();
    assert.deepEqual(disk.allocations.map((a) => a.containerId), ["c-w1"]);
    assert.ok(!disk.cooldowns.some((c) => c.ip === ip));
    // EC2: still assigned to the same ENI.
    const ec2 = simNodeEnis(sim).find((e) => e.id === owner.id);
    assert.ok(ec2?.ips.includes(ip), `${ip} still assigned to ${owner.id} in EC2`);

    // The runtime's retry while the disk is still full: the same clear failure, not 106.
    const retried = await client.call(addReq("w2"));
    assert.ok(!retried.ok && retried.code === 5, JSON.stringify(retried));

    // Room again: the retry succeeds and the disk holds what the answer said.
    await Deno.remove(`${seen}/filler`);
    const served: IpamResponse = await client.call(addReq("w2"));
    assert.ok(served.ok && "allocation" in served, JSON.stringify(served));
    const got = served.allocation.ip;
    assert.ok(
      (await onDisk()).allocations.some((a) => a.containerId === "c-w2" && a.ip === got),
      "the served allocation is on disk",
    );

    // Shutdown with the disk full: the last save fails and says so in the log.
    await fill();
    await daemon.stop();
    const lines = (await Deno.readTextFile(`${root}/daemon.log`)).split("\n").filter((l) =>
      l.startsWith("{")
    ).map((l) => JSON.parse(l));
    const last = lines.find((l) => /final checkpoint could not be written/.test(l.message));
    assert.ok(last, "the failed final save is logged");
    assert.equal(last.level, "ERROR");
    assert.match(last.properties.error, /No space left on device/);
    assert.equal(last.properties.stateDir, stateDir);
  } finally {
    client.close();
    await daemon.kill9();
    await sim.close();
    // The tmpfs goes with the daemon's mount namespace.
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
