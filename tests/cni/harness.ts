/**
 * Shared setup for the CNI plugin tests: a "node" netns (where the plugin and cnitool run,
 * so the host is never touched) with an ENI-like link, pod netns, a CNI_PATH with the
 * vpcni launcher and the reference plugins, and helpers to run the plugin or cnitool.
 *
 * @module
 */
import { createNetns, deleteNetns, isRoot, type TestNetns, uniqueName } from "../helpers/netns.ts";
import { run, type RunResult, sh } from "../helpers/sh.ts";
import { peerBin } from "../helpers/peers.ts";
import { type CniBinDir, makeCniBinDir } from "../helpers/cni_launcher.ts";
import assert from "node:assert/strict";

/** Every netns these tests create starts with this. */
export const PREFIX = "vcn";

/** MAC of the node's ENI-like link (the stand-in daemon reports it as the primary ENI). */
export const NODE_ENI_MAC = "02:00:00:77:00:01";

/** Fails the test with a clear message unless it can run (root, peers present). */
export function requirePrereqs(): void {
  if (!isRoot()) throw new Error("the CNI tests need root (network namespaces, veth)");
  peerBin("cnitool");
  peerBin("host-local");
}

/** A test node: its netns, a scratch dir, the CNI_PATH dir. */
export interface TestNode {
  node: TestNetns;
  dir: string;
  bin: CniBinDir;
  /** Pod netns made with {@linkcode TestNode.pod}, removed by `cleanup`. */
  pods: TestNetns[];
  /** Makes a pod netns. */
  pod(): Promise<TestNetns>;
  /** Removes every netns and file the node made. */
  cleanup(): Promise<void>;
}

/**
 * Creates a node netns with `eth0` (MAC {@linkcode NODE_ENI_MAC}, 10.77.0.10/24, peer
 * `eth0p` in the same netns, both up) standing in for the primary ENI.
 */
export async function makeNode(): Promise<TestNode> {
  requirePrereqs();
  const node = await createNetns(uniqueName(`${PREFIX}n`));
  const dir = await Deno.makeTempDir({ prefix: "vcn-" });
  const bin = await makeCniBinDir();
  const pods: TestNetns[] = [];
  try {
    // No IPv6 on the node: DAD and link-local routes would change the kernel state under
    // the before/after comparisons.
    for (const k of ["all", "default"]) {
      await sh(["sysctl", "-q", "-w", `net.ipv6.conf.${k}.disable_ipv6=1`], { netns: node.name });
    }
    await sh([
      "ip",
      "link",
      "add",
      "eth0",
      "address",
      NODE_ENI_MAC,
      "type",
      "veth",
      "peer",
      "name",
      "eth0p",
    ], {
      netns: node.name,
    });
    await sh(["ip", "addr", "add", "10.77.0.10/24", "dev", "eth0"], { netns: node.name });
    await sh(["ip", "link", "set", "eth0", "up"], { netns: node.name });
    await sh(["ip", "link", "set", "eth0p", "up"], { netns: node.name });
  } catch (e) {
    await deleteNetns(node.name);
    throw e;
  }
  return {
    node,
    dir,
    bin,
    pods,
    async pod() {
      const p = await createNetns(uniqueName(`${PREFIX}p`));
      pods.push(p);
      return p;
    },
    async cleanup() {
      for (const p of pods) await deleteNetns(p.name);
      await deleteNetns(node.name);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
      await bin.remove().catch(() => {});
    },
  };
}

/** The answer of one plugin run. */
export interface PluginRun extends RunResult {
  /** stdout parsed as JSON, when it is JSON. */
  json?: Record<string, unknown>;
}

/** The CNI environment of one call for interface eth0, with `extra` variables on top. */
export function podEnv(
  cmd: string,
  id: string,
  netns: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return { CNI_COMMAND: cmd, CNI_CONTAINERID: id, CNI_NETNS: netns, CNI_IFNAME: "eth0", ...extra };
}

/** Asserts that a plugin run printed no JavaScript stack trace, on stdout or stderr. */
export function assertNoStack(r: PluginRun): void {
  assert.doesNotMatch(r.stdout + r.stderr, /\n\s+at \S+ \(|file:\/\/\//, "no JS stack trace");
}

/** Runs the vpcni launcher once inside `netns` with CNI env vars and stdin. */
export async function runVpcni(
  node: TestNode,
  env: Record<string, string>,
  stdin: string,
): Promise<PluginRun> {
  const r = await run([node.bin.vpcni], { netns: node.node.name, env, stdin });
  let json: Record<string, unknown> | undefined;
  try {
    json = r.stdout.trim() === "" ? undefined : JSON.parse(r.stdout);
  } catch {
    json = undefined;
  }
  return { ...r, json };
}

/** Writes a conflist into `<dir>/net/` and returns the NETCONFPATH. */
export async function writeConflist(
  dir: string,
  conflist: Record<string, unknown>,
): Promise<string> {
  const net = `${dir}/net`;
  await Deno.mkdir(net, { recursive: true });
  await Deno.writeTextFile(
    `${net}/10-${conflist.name}.conflist`,
    JSON.stringify(conflist, null, 2),
  );
  return net;
}

/** Runs `cnitool <verb> <network> <netns path>` inside the node netns. */
export function cnitool(
  node: TestNode,
  netconfPath: string,
  verb: "add" | "check" | "del" | "gc" | "status",
  network: string,
  pod: TestNetns,
  extraEnv: Record<string, string> = {},
): Promise<RunResult> {
  return run([peerBin("cnitool"), verb, network, pod.path], {
    netns: node.node.name,
    env: { NETCONFPATH: netconfPath, CNI_PATH: node.bin.dir, ...extraEnv },
  });
}

/** A host-local `ipam` section with its state under `dir`. */
export function hostLocalIpam(dir: string, subnet = "10.88.0.0/24"): Record<string, unknown> {
  return { type: "host-local", ranges: [[{ subnet }]], dataDir: `${dir}/host-local` };
}

/** Addresses host-local currently holds for `network`. */
export async function hostLocalReserved(dir: string, network: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(`${dir}/host-local/${network}`)) {
      if (/^\d+\.\d+\.\d+\.\d+$/.test(e.name)) out.push(e.name);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return out.sort();
}

/** Unique network names keep libcni's shared result cache apart between tests. */
export function networkName(tag: string): string {
  return `vcn-${tag}-${Deno.pid}-${Math.floor(Math.random() * 1e6)}`;
}

/**
 * Gives the node a link for each ENI of `macs` (the datapath finds an ENI's link by MAC):
 * veth pairs, up, as this kernel may lack the dummy driver.
 */
export async function addEniLinks(node: TestNode, macs: readonly string[]): Promise<void> {
  for (const [i, mac] of macs.entries()) {
    await sh(
      ["ip", "link", "add", `eni${i}`, "mtu", "9001", "address", mac.toLowerCase()]
        .concat(["type", "veth", "peer", "name", `eni${i}p`, "mtu", "9001"]),
      { netns: node.node.name },
    );
    for (const l of [`eni${i}`, `eni${i}p`]) {
      await sh(["ip", "link", "set", l, "up"], { netns: node.node.name });
    }
  }
}
