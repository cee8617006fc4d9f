/**
 * A DEL while the daemon is down must not leak the pod's address, whatever the order of the
 * DEL, the daemon's restart and the runtime's removal of the netns, and a pod that is still
 * running never loses its address to it. The real `vpcni serve` runs as a child process on
 * the simulator (so it can be stopped and killed with SIGKILL), wiring pods in a test node
 * netns; the plugin is the real launcher, run in that netns as the runtime runs it.
 *
 * Orders covered: DEL → restart → netns removed (the reported leak); DEL → netns removed →
 * restart; netns removed → DEL → restart; DEL with no record written (the sweep's backstop,
 * after the netns goes); kill -9 of the daemon in the middle of a DEL, the runtime retrying;
 * a record older than the ADD it would hit.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { delRecordDir, writeDelRecord } from "../../proto/del_records.ts";
import type { PoolView } from "../../proto/introspect.ts";
import { deleteNetns, type TestNetns } from "../helpers/netns.ts";
import { ipJson } from "../helpers/sh.ts";
import {
  eventually,
  ipamClient,
  metricValue,
  simNodeEnis,
  standardScenario,
  tempRoot,
} from "../ipam/harness.ts";
import {
  type DaemonProcess,
  randomPort,
  spawnDaemon,
  writeChildConfig,
} from "../ipam/daemon_process.ts";
import { assertNoStack, makeNode, podEnv, runVpcni, type TestNode } from "./harness.ts";
import { sh } from "../helpers/sh.ts";

const NETWORK = "vcn-down";

interface Pod {
  id: string;
  netns: TestNetns;
  ip: string;
  /** The ADD's result, which the runtime hands back on DEL as prevResult. */
  result: Record<string, unknown>;
}

Deno.test("DEL while the daemon is down: no reservation outlives its pod, in any order", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const node = await makeNode();
  const port = randomPort();
  const socket = `${root}/ipam.sock`;
  const cfgPath = await writeChildConfig(root, sim, port, {
    nodeNetns: node.node.path,
    pools: [{ name: "default", warmEnis: 0, warmIps: 4, minimumIps: 24, ipCooldownSeconds: 1 }],
  });
  let daemon: DaemonProcess | undefined;
  const start = async () => {
    daemon = spawnDaemon(root, cfgPath, port);
    await daemon.ready(60_000);
  };
  const conf = JSON.stringify({
    cniVersion: "1.1.0",
    name: NETWORK,
    type: "vpcni",
    datapath: "veth",
    mtu: 1500,
    daemonSocket: socket,
    daemonTimeoutMs: 30_000,
  });
  const held = async (id: string) => {
    const client = ipamClient(socket);
    const r = await client.call({ op: "check", network: NETWORK, containerId: id, ifName: "eth0" });
    client.close();
    return r.ok && "allocation" in r ? r.allocation.ip : `code ${!r.ok && r.code}`;
  };
  const metric = async (reason: string) =>
    metricValue(
      await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text()),
      "vpcni_ipam_released_gone_total",
      { reason },
    );
  const del = async (p: Pod) => {
    const prev = JSON.stringify({ ...JSON.parse(conf), prevResult: p.result });
    const r = await runVpcni(node, podEnv("DEL", p.id, p.netns.path), prev);
    assertNoStack(r);
    return r;
  };
  const removeNetns = (p: Pod) => deleteNetns(p.netns.name);
  try {
    await start();
    // Every ENI the pool attached gets its link on the node before the first pod.
    assert.ok(
      await eventually(async () => {
        const pools = await fetch(`http://127.0.0.1:${port}/v1/pools`).then((r) =>
          r.json() as Promise<PoolView[]>
        );
        return pools[0].total >= 24;
      }, 30_000),
      "the pool holds its minimum",
    );
    await addEniLinksOf(node, sim);

    const pods = new Map<string, Pod>();
    const addPods = async (group: string, n: number) => {
      const out: Pod[] = [];
      for (let i = 0; i < n; i++) {
        const netns = await node.pod();
        const id = `${group}${i}`;
        const r = await runVpcni(node, podEnv("ADD", id, netns.path), conf);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        const ip = String((r.json?.ips as { address: string }[])[0].address).split("/")[0];
        const pod = { id, netns, ip, result: r.json! };
        pods.set(id, pod);
        out.push(pod);
      }
      return out;
    };
    // The sweep's pods first: its grace counts from the ADD.
    const noRecord = await addPods("norec", 3);
    const delRestartRm = await addPods("drr", 4);
    const delRmRestart = await addPods("dmr", 3);
    const rmDelRestart = await addPods("rmd", 3);
    const killed = await addPods("kill", 3);
    const live = await addPods("live", 3);
    const [stale] = await addPods("stale", 1);
    const liveIps = live.map((p) => p.ip);

    // Phase 1: the daemon is down while the runtime tears pods down in every order.
    assert.equal(await daemon!.stop(), 0);
    // No record can be written first (a file where its directory goes): the DEL still
    // succeeds, and only the sweep can free these addresses.
    await Deno.writeTextFile(delRecordDir(socket), "in the way\n");
    for (const p of noRecord) assert.equal((await del(p)).code, 0);
    await Deno.remove(delRecordDir(socket));
    for (const p of delRestartRm) assert.equal((await del(p)).code, 0);
    for (const p of delRmRestart) {
      assert.equal((await del(p)).code, 0);
      await removeNetns(p);
    }
    for (const p of rmDelRestart) {
      await removeNetns(p);
      assert.equal((await del(p)).code, 0);
    }

    await start();
    // The daemon released every recorded DEL before it said ready.
    for (const p of [...delRestartRm, ...delRmRestart, ...rmDelRestart]) {
      assert.equal(await held(p.id), "code 3", `${p.id} (${p.ip}) is still held after restart`);
    }
    // The runtime removes the netns only now (the reported order).
    for (const p of delRestartRm) await removeNetns(p);
    // Without a record, a pod whose netns is still there keeps its address...
    for (const p of noRecord) assert.equal(await held(p.id), p.ip);
    // ...and loses it once the netns goes (its host rule went with the DEL).
    for (const p of noRecord) await removeNetns(p);
    assert.ok(
      await eventually(async () => {
        for (const p of noRecord) if (await held(p.id) !== "code 3") return false;
        return true;
      }, 60_000),
      "the sweep released the reservations whose netns and host rule are gone",
    );
    assert.ok(await metric("pod-gone") >= 3, "the sweep's releases are counted");
    assert.ok(await metric("del-while-down") >= 4, "the records' releases are counted");

    // Phase 2: kill -9 of the daemon in the middle of a DEL; the runtime retries the DEL
    // until it succeeds (against the daemon that is now down).
    for (const [i, p] of killed.entries()) {
      if (i > 0) await start();
      const running = del(p);
      await new Promise((r) => setTimeout(r, 40 + 60 * i));
      await daemon!.kill9();
      let r = await running;
      for (let tries = 0; r.code !== 0 && tries < 5; tries++) r = await del(p);
      assert.equal(r.code, 0, `the retried DEL of ${p.id}: ${r.stdout}`);
      if (i === 0) await removeNetns(p);
    }
    await start();
    for (const p of killed) assert.equal(await held(p.id), "code 3", `${p.id} still held`);
    for (const p of killed.slice(1)) await removeNetns(p);
    const rules = await ipJson<{ dst?: string; priority?: number }[]>(
      ["-4", "rule", "show"],
      node.node.name,
    );
    for (const p of killed) {
      assert.ok(!rules.some((r) => r.dst === p.ip), `the host rule of ${p.ip} is gone`);
    }

    // Phase 3: a record older than the ADD of the same attachment (a DEL that came before
    // it) never frees the address that ADD took.
    const recordTime = Date.now() - 3_600_000;
    const recordPath = await writeDelRecord(socket, {
      version: 1,
      network: NETWORK,
      containerId: stale.id,
      ifName: "eth0",
      time: recordTime,
    });
    assert.ok(
      await eventually(async () => !(await exists(recordPath)), 10_000),
      "the record was read and removed",
    );
    assert.equal(await held(stale.id), stale.ip, "the live pod keeps its address");

    // Running pods kept their addresses through every restart, and no address is held twice.
    for (const p of live) assert.equal(await held(p.id), p.ip);
    const again = await addPods("after", 6);
    for (const p of again) assert.ok(!liveIps.includes(p.ip), `${p.ip} was handed out twice`);
    for (const p of [...live, stale, ...again]) assert.equal((await del(p)).code, 0);
  } finally {
    await daemon?.stop().catch(() => {});
    await node.cleanup();
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** Links on the node for every ENI attached in the simulator, named after their index. */
async function addEniLinksOf(node: TestNode, sim: Parameters<typeof simNodeEnis>[0]) {
  for (const e of simNodeEnis(sim)) {
    const mac = sim.state.enis.get(e.id)!.mac.toLowerCase();
    const name = `eni${e.deviceIndex}`;
    await sh(
      ["ip", "link", "add", name, "mtu", "9001", "address", mac, "type", "veth"]
        .concat(["peer", "name", `${name}p`, "mtu", "9001"]),
      { netns: node.node.name },
    );
    for (const l of [name, `${name}p`]) {
      await sh(["ip", "link", "set", l, "up"], { netns: node.node.name });
    }
  }
}
