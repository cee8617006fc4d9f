/**
 * The CNI fuzz test: at least 10,000 generated requests (tests/cni/fuzz_cases.ts), each
 * invalid by construction, across every field of the network configuration in both roles
 * and every CNI_* variable. For each: the spec's error JSON with a code its mutations allow,
 * exit 1, no stack trace on stdout or stderr, an answer within a bound, and nothing changed
 * — not the node's links, addresses, routes, rules or neighbours, not the live pod's, not
 * the daemon's reservations.
 *
 * The bulk runs in-process through `runPlugin` with this thread moved into the test's node
 * netns first, as netlink/ moves threads, so a plugin bug acts on the test node and never on
 * the machine; a few hundred of the same cases then run as processes of the installed
 * plugin. The daemon is the IPAM stand-in (tests/helpers/ipam_standin.ts) in a worker: the
 * real `vpcni serve` needs the simulator served from this same thread, which the in-process
 * plugin blocks during its daemon round trip; and the cases that reach a daemon only need
 * the protocol, which the stand-in speaks.
 *
 * Replay: the seed is printed on failure; VPCNI_FUZZ_SEED=<seed> VPCNI_FUZZ_CASE=<index>
 * runs that one case. VPCNI_FUZZ_CASES sets the count (default 10,000).
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { sh } from "../helpers/sh.ts";
import { CLONE_NEWNET, cString, libc, O_CLOEXEC, O_RDONLY } from "../../base/libc.ts";
import {
  listAddresses,
  listLinks,
  listNeighbours,
  listRoutes,
  listRules,
  NetlinkSocket,
} from "../../netlink/mod.ts";
import { type PluginIo, runPlugin } from "../../cni/plugin.ts";
import { makeNode, NODE_ENI_MAC, type TestNode } from "./harness.ts";
import { runBounded, STACK_TRACE, withInstalledPlugin } from "./refusal.ts";
import { type FuzzCase, fuzzCase, type FuzzWorld } from "./fuzz_cases.ts";

const SEED = Number(Deno.env.get("VPCNI_FUZZ_SEED") ?? Math.floor(Math.random() * 2 ** 31));
const CASES = Number(Deno.env.get("VPCNI_FUZZ_CASES") ?? 10_000);
const ONLY = Deno.env.get("VPCNI_FUZZ_CASE");
/** Process runs of the installed plugin, spread over the cases. */
const SPAWNS = Math.min(320, CASES);
/** A case answering later than this hung (the daemon timeout in the cases is 3 s). */
const CASE_BOUND_MS = 10_000;

/**
 * The reference loopback plugin, run as the delegated IPAM plugin by the "ipam.type loopback"
 * cases, sets `lo` up on ADD and down on the DEL that vpcni's refusal sends it: its own doing
 * in the pod's netns, not vpcni's. Puts `lo` back up before the netns is compared.
 */
function restoreLoopback(c: FuzzCase, netns: string): void {
  if (!c.mutations.includes("ipam.type loopback")) return;
  new Deno.Command("nsenter", { args: [`--net=${netns}`, "ip", "link", "set", "lo", "up"] })
    .outputSync();
}

/** A daemon stand-in in a worker (see the module comment). */
function workerDaemon() {
  const w = new Worker(new URL("./fuzz_daemon.ts", import.meta.url).href, { type: "module" });
  const ask = <T>(msg: Record<string, unknown>): Promise<T> =>
    new Promise((resolve) => {
      w.onmessage = (e) => resolve(e.data as T);
      w.postMessage(msg);
    });
  return {
    start: (opts: Record<string, unknown>) => ask({ op: "start", opts }),
    held: async () => (await ask<{ held: string[] }>({ op: "reservations" })).held,
    async close() {
      await ask({ op: "close" });
      w.terminate();
    },
  };
}

/** The thread's netns, by netlink: what a case must not change. Volatile bits left out. */
function netlinkState(netns?: string): string {
  const s = netns ? NetlinkSocket.openIn(netns) : NetlinkSocket.open();
  try {
    const notLinkLocal = (x: string | undefined) => !x?.startsWith("fe80") && !x?.startsWith("ff");
    return JSON.stringify({
      links: listLinks(s).map(({ operState: _, ...l }) => l),
      addrs: listAddresses(s).filter((a) => notLinkLocal(a.address)),
      routes: listRoutes(s).filter((r) => notLinkLocal(r.dst)),
      rules: listRules(s),
      neigh: listNeighbours(s).filter((n) => n.state === "permanent"),
    });
  } finally {
    s.close();
  }
}

/** Moves this thread into `path`'s netns; returns a function that moves it back. */
function enterNetns(path: string): () => void {
  const l = libc();
  const home = l.open(cString("/proc/thread-self/ns/net"), O_RDONLY | O_CLOEXEC, 0);
  const target = l.open(cString(path), O_RDONLY | O_CLOEXEC, 0);
  assert.ok(home >= 0 && target >= 0, "open netns");
  assert.equal(l.setns(target, CLONE_NEWNET), 0, "setns into the node");
  l.close(target);
  return () => {
    assert.equal(l.setns(home, CLONE_NEWNET), 0, "setns back");
    l.close(home);
  };
}

function sameNetns(a: string, b: string): boolean {
  const x = Deno.statSync(a);
  const y = Deno.statSync(b);
  return x.dev === y.dev && x.ino === y.ino;
}

/** Everything needed to replay a case, for the failure message. */
function replay(c: FuzzCase, answer: string, why: string): string {
  return [
    `fuzz case failed: ${why}`,
    `  seed ${SEED}, case ${c.index}: ${c.verb} (${c.role} role), mutations: ${
      c.mutations.join(", ")
    }`,
    `  env: ${JSON.stringify(c.env).slice(0, 2000)}`,
    `  stdin: ${c.stdin.slice(0, 2000)}${c.stdin.length > 2000 ? "…" : ""}`,
    `  answer: ${answer.slice(0, 2000)}`,
    `  replay: VPCNI_FUZZ_SEED=${SEED} VPCNI_FUZZ_CASE=${c.index} deno test -A --no-check ` +
    "tests/cni/fuzz_test.ts",
  ].join("\n");
}

/** Checks one answer: the spec's error JSON, a code the case allows, no stack trace. */
function checkAnswer(c: FuzzCase, exit: number, stdout: string, stderr: string): void {
  const fail = (why: string) => {
    throw new Error(replay(c, `exit ${exit}, stdout ${stdout}, stderr ${stderr}`, why));
  };
  if (exit === 0) fail("the request was accepted");
  let e: { cniVersion?: unknown; code?: unknown; msg?: unknown; details?: unknown };
  try {
    e = JSON.parse(stdout);
  } catch {
    return fail("stdout is not JSON");
  }
  const keys = Object.keys(e).filter((k) => k !== "details").join(",");
  if (keys !== "cniVersion,code,msg") fail(`the error object has keys ${keys}`);
  if (typeof e.cniVersion !== "string" || typeof e.msg !== "string") fail("field types");
  if (e.details !== undefined && typeof e.details !== "string") fail("details type");
  if (!c.codes.includes(e.code as number)) fail(`code ${e.code} is not one of ${c.codes}`);
  if (STACK_TRACE.test(stdout) || STACK_TRACE.test(stderr)) fail("a stack trace");
}

async function prepare(node: TestNode) {
  const files = `${node.dir}/files`;
  await Deno.mkdir(files);
  await sh(["mkfifo", `${files}/fifo`]);
  await Deno.writeTextFile(`${files}/regular`, "not a namespace\n");
  const listener = Deno.listen({ transport: "unix", path: `${files}/sock` });
  return { files, listener, installedNode: await withInstalledPlugin(node) };
}

Deno.test("fuzz: generated bad requests are refused with the spec's error and change nothing", async () => {
  const node = await makeNode();
  const daemon = workerDaemon();
  const socket = `${node.dir}/ipam.sock`;
  const { files, listener, installedNode } = await prepare(node);
  let leave: (() => void) | undefined;
  const realWrite = Deno.stderr.writeSync;
  try {
    await daemon.start({
      nodeNetns: node.node.path,
      socket,
      addresses: Array.from({ length: 20 }, (_, i) => `10.77.0.${100 + i}`),
      eniMac: NODE_ENI_MAC,
    });
    const live = await node.pod();
    const other = await node.pod();
    const network = "vcn-fuzz";
    const added = await runBounded(
      installedNode,
      {
        CNI_COMMAND: "ADD",
        CNI_CONTAINERID: "vcn-fuzz-live",
        CNI_NETNS: live.path,
        CNI_IFNAME: "eth0",
        CNI_PATH: node.bin.dir,
      },
      JSON.stringify({
        cniVersion: "1.1.0",
        name: network,
        type: "vpcni",
        datapath: "veth",
        mtu: 1500,
        daemonSocket: socket,
      }),
    );
    assert.equal(added.code, 0, added.stdout + added.stderr);
    const ip = (added.json as { ips: { address: string }[] }).ips[0].address.split("/")[0];
    const world: FuzzWorld = {
      network,
      socket,
      deadSocket: `${node.dir}/nobody.sock`,
      cniPath: node.bin.dir,
      livePod: { containerId: "vcn-fuzz-live", ifName: "eth0", netns: live.path, ip },
      otherNetns: other.path,
      nodeNetns: node.node.path,
      files: {
        fifo: `${files}/fifo`,
        regular: `${files}/regular`,
        dir: files,
        socket: `${files}/sock`,
        log: `${files}/vpcni.log`,
      },
    };
    const fullState = async () => [
      await kernelState(node.node.name),
      await kernelState(live.name),
      await kernelState(other.name),
    ];
    const fullBefore = await fullState();
    const heldBefore = await daemon.held();
    assert.equal(heldBefore.length, 1, "the live pod's reservation");

    // From here on this thread is in the node netns, before anything in this process opened
    // a netlink socket or entered a netns (netlink/ returns threads to where they began).
    leave = enterNetns(node.node.path);
    assert.ok(sameNetns("/proc/thread-self/ns/net", node.node.path));
    const nodeBefore = netlinkState();
    const liveBefore = netlinkState(live.path);
    const otherBefore = netlinkState(other.path);

    let ran = 0;
    let pluginMs = 0;
    let checkMs = 0;
    let slowest = { ms: 0, index: -1 };
    const byCode = new Map<number, number>();
    const spawnCases: FuzzCase[] = [];
    const started = performance.now();
    let stderr = "";
    (Deno.stderr as { writeSync: (b: Uint8Array) => number }).writeSync = (b) => {
      stderr += new TextDecoder().decode(b);
      return b.length;
    };
    // CASES cases, or the one case to replay.
    const first = ONLY !== undefined ? Number(ONLY) : 0;
    for (let i = first; ONLY !== undefined ? i === first : ran < CASES; i++) {
      const c = fuzzCase(SEED, i, world);
      let stdout = "";
      stderr = "";
      const io: PluginIo = {
        getEnv: (n) => c.env[n],
        readStdin: () => new TextEncoder().encode(c.stdin),
        writeStdout: (t) => (stdout += t),
      };
      const t0 = performance.now();
      const exit = await runPlugin(io);
      const ms = performance.now() - t0;
      pluginMs += ms;
      if (ms > slowest.ms) slowest = { ms, index: i };
      const state = () => replay(c, stdout, "the node, the pod or the daemon changed");
      checkAnswer(c, exit, stdout, stderr);
      const code = (JSON.parse(stdout) as { code: number }).code;
      byCode.set(code, (byCode.get(code) ?? 0) + 1);
      if (ms > CASE_BOUND_MS) throw new Error(replay(c, stdout, `took ${ms.toFixed(0)} ms`));
      if (!sameNetns("/proc/thread-self/ns/net", node.node.path)) {
        throw new Error(replay(c, stdout, "the thread left the node netns"));
      }
      if (netlinkState() !== nodeBefore) throw new Error(state());
      if (netlinkState(live.path) !== liveBefore) throw new Error(state());
      if (JSON.stringify(await daemon.held()) !== JSON.stringify(heldBefore)) {
        throw new Error(state());
      }
      checkMs += performance.now() - t0 - ms;
      ran++;
      restoreLoopback(c, other.path);
      if (
        (c.env.CNI_NETNS === other.path || ran % 100 === 0) &&
        netlinkState(other.path) !== otherBefore
      ) {
        throw new Error(state());
      }
      if (ran % 2500 === 0) {
        assert.deepEqual(await fullState(), fullBefore, replay(c, stdout, "ip -j"));
      }
      if (
        (ONLY !== undefined || ran % Math.max(1, Math.floor(CASES / SPAWNS)) === 0) &&
        !JSON.stringify(c.env).includes("\\u0000") &&
        c.env.CNI_COMMAND !== undefined
      ) {
        spawnCases.push(c);
      }
    }
    (Deno.stderr as { writeSync: unknown }).writeSync = realWrite;
    const inProcessMs = performance.now() - started;

    // The same kind of cases through the installed plugin, two processes at a time.
    const spawnStarted = performance.now();
    for (let k = 0; k < spawnCases.length; k += 2) {
      await Promise.all(
        spawnCases.slice(k, k + 2).map(async (c) => {
          const r = await runBounded(installedNode, c.env, c.stdin, CASE_BOUND_MS);
          assert.ok(!r.killed, replay(c, r.stdout, "the process hung"));
          checkAnswer(c, r.code, r.stdout, r.stderr);
          restoreLoopback(c, other.path);
        }),
      );
      if (netlinkState() !== nodeBefore || netlinkState(live.path) !== liveBefore) {
        throw new Error(
          `seed ${SEED}: a process case near ${spawnCases[k].index} changed the kernel`,
        );
      }
    }
    const spawnMs = performance.now() - spawnStarted;
    assert.deepEqual(await fullState(), fullBefore, `seed ${SEED}: ip -j state after the run`);
    assert.deepEqual(await daemon.held(), heldBefore);
    console.log(
      `fuzz seed ${SEED}: ${ran} cases in-process in ${(inProcessMs / 1000).toFixed(1)} s, ` +
        `${spawnCases.length} as processes in ${(spawnMs / 1000).toFixed(1)} s, ` +
        `in the plugin ${(pluginMs / 1000).toFixed(1)} s ` +
        `(slowest case ${slowest.index}: ${slowest.ms.toFixed(0)} ms), checks ` +
        `${(checkMs / 1000).toFixed(1)} s; codes ${
          JSON.stringify(Object.fromEntries([...byCode].sort((a, b) => a[0] - b[0])))
        }`,
    );
  } catch (e) {
    (Deno.stderr as { writeSync: unknown }).writeSync = realWrite;
    console.error(`fuzz seed ${SEED} (replay with VPCNI_FUZZ_SEED=${SEED})`);
    throw e;
  } finally {
    (Deno.stderr as { writeSync: unknown }).writeSync = realWrite;
    leave?.();
    listener.close();
    await daemon.close();
    await node.cleanup();
  }
});
