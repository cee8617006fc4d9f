/**
 * vpcni under a real container runtime: containerd 1.6 (Debian's, with runc), driven by
 * crictl as kubelet drives it over CRI v1. The node is simulated (EC2 + IMDS simulator, VPC
 * fabric, node netns with the vpcni daemon, plugin and conflist put in place by
 * `vpcni install`); containerd runs inside the node netns and execs the installed plugin for
 * every pod sandbox, with the pod's annotations delivered through the
 * `io.kubernetes.cri.pod-annotations` capability.
 *
 * Needs root, containerd, runc, busybox-static, crictl and the reference loopback plugin
 * (`bash tools/dev setup`); fails saying which is missing otherwise.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  nodeCheckpoint,
  RUNTIME_HOST_VETH_PREFIX,
  RUNTIME_NETWORK,
  type RuntimeNode,
  startRuntimeNode,
} from "../helpers/runtime_node.ts";
import { Containerd, runtimeBinaries } from "../helpers/runtime_containerd.ts";
import { ipJson, run } from "../helpers/sh.ts";
import { DEMO_INSTANCE } from "../../cli/demo_world.ts";
import { nodeObjectsNaming } from "../helpers/node_objects.ts";

const TAG = `vrt${Deno.pid % 100000}`;
const HOST_VETH_PREFIX = RUNTIME_HOST_VETH_PREFIX;

interface PodStatus {
  status: {
    id: string;
    state: string;
    network: { ip: string; additionalIps: { ip: string }[] };
    annotations: Record<string, string>;
  };
  info: { runtimeSpec: { linux: { namespaces: { type: string; path?: string }[] } } };
}

function inCidr(ip: string, cidr: string): boolean {
  const toInt = (a: string) => a.split(".").reduce((n, o) => n * 256 + Number(o), 0);
  const [base, len] = cidr.split("/");
  const size = 2 ** (32 - Number(len));
  return Math.floor(toInt(ip) / size) === Math.floor(toInt(base) / size);
}

async function hostPodLinks(node: RuntimeNode): Promise<string[]> {
  const links = await ipJson<{ ifname: string }[]>(["link", "show"], node.nodeNetns);
  return links.map((l) => l.ifname).filter((n) => n.startsWith(HOST_VETH_PREFIX));
}

/** Every rule and route (all tables) of the node that names `ip`, as text. */
function nodeObjectsFor(node: RuntimeNode, ip: string): Promise<string[]> {
  return nodeObjectsNaming(
    ip,
    async (args) => (await run(["ip", "-n", node.nodeNetns, ...args])).stdout,
  );
}

/** libcni's result cache entries for a sandbox (containerd 1.6 keeps them in /var/lib/cni). */
async function cniCacheFor(sandboxId: string): Promise<string[]> {
  const found: string[] = [];
  try {
    for await (const e of Deno.readDir("/var/lib/cni/results")) {
      if (e.name.includes(sandboxId)) found.push(e.name);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return found;
}

Deno.test({
  name: "containerd + crictl: pod sandboxes get VPC addresses from vpcni by pool annotation, " +
    "talk to the node, and leave nothing behind",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    assert.equal(Deno.uid(), 0, "the runtime test needs root (namespaces, containerd)");
    runtimeBinaries(); // fails here, listing what to install, before anything is created

    const node = await startRuntimeNode(TAG);
    let containerd: Containerd | undefined;
    let cleanupProblems: string[] = [];
    try {
      const conflist = await node.conflist();
      assert.deepEqual(
        conflist.plugins[0].capabilities,
        { "io.kubernetes.cri.pod-annotations": true },
        "containerd passes pod annotations only to a plugin that declares the capability",
      );

      containerd = await Containerd.start({
        nodePath: node.nodePath,
        cniBinDir: node.binDir,
        cniConfDir: node.confDir,
        tag: TAG,
      });
      const info = JSON.parse(await containerd.crictlOk(["info"]));
      const netReady = info.status.conditions.find((c: { type: string }) =>
        c.type === "NetworkReady"
      );
      assert.equal(
        netReady?.status,
        true,
        `containerd's network is not ready: ${JSON.stringify(netReady)}`,
      );
      const networks: string[] = info.cniconfig.Networks.map((n: { Config: { Name: string } }) =>
        n.Config.Name
      );
      assert.ok(networks.includes(RUNTIME_NETWORK), `containerd loaded ${networks}, not vpcni`);

      // Two sandboxes: one asks for the public pool, one takes the default (internal).
      const publicId = (await containerd.crictlOk([
        "runp",
        await containerd.podConfig("web", { "vpcni.io/pool": "public" }),
      ])).trim();
      const defaultId = (await containerd.crictlOk([
        "runp",
        await containerd.podConfig("db", {}),
      ])).trim();

      const pods: { id: string; pool: string; zone: string; ip: string; netns: string }[] = [];
      const wanted = [
        { id: publicId, pool: "public", zone: "public" },
        { id: defaultId, pool: "internal", zone: "internal" },
      ];
      for (const { id, pool, zone } of wanted) {
        const st = JSON.parse(await containerd.crictlOk(["inspectp", id])) as PodStatus;
        assert.equal(st.status.state, "SANDBOX_READY");
        const ip = st.status.network.ip;
        assert.match(ip, /^\d+\.\d+\.\d+\.\d+$/, `crictl reports no pod IP for ${id}`);
        const netns = st.info.runtimeSpec.linux.namespaces.find((n) => n.type === "network")?.path;
        assert.ok(netns, "the sandbox has no netns path");
        pods.push({ id, pool, zone, ip, netns });

        // The VPC agrees: the address is a secondary IP of one of this node's ENIs, in a
        // subnet of the pool's zone.
        const home = node.whereIs(ip);
        assert.ok(home, `no ENI in the VPC holds ${ip}, which crictl reports for pod ${pool}`);
        assert.equal(home.instanceId, DEMO_INSTANCE, `${ip} sits on another instance's ENI`);
        assert.equal(home.primary, false, `${ip} is the primary address of ${home.eniId}`);
        assert.equal(home.zone, zone, `pod in pool ${pool} got ${ip} from a ${home.zone} subnet`);
        assert.ok(
          node.subnetsOfZone(zone).some((c) => inCidr(ip, c)),
          `${ip} is outside the ${zone} subnets ${node.subnetsOfZone(zone)}`,
        );

        // Inside the pod: eth0 holds exactly that address.
        const addrs = await run([
          "nsenter",
          `--net=${netns}`,
          "ip",
          "-j",
          "-4",
          "addr",
          "show",
          "eth0",
        ]);
        assert.equal(addrs.code, 0, addrs.stderr);
        const local = JSON.parse(addrs.stdout)[0].addr_info.map((a: { local: string }) => a.local);
        assert.deepEqual(local, [ip]);
      }
      assert.notEqual(pods[0].ip, pods[1].ip);

      // The daemon recorded both, with the pod identity containerd passed in CNI_ARGS.
      const cp = await nodeCheckpoint(node);
      for (const p of pods) {
        const a = cp.allocations.find((x) => x.containerId === p.id);
        assert.ok(a, `the checkpoint has no allocation for sandbox ${p.id}`);
        assert.equal(a.ip, p.ip);
        assert.equal(a.pool, p.pool, "the pool annotation did not reach the daemon");
        assert.equal(a.network, RUNTIME_NETWORK);
        assert.equal(a.podNamespace, "vrt");
        assert.equal(a.podName, p.pool === "public" ? "web" : "db");
      }

      // Host side exists while the pods run (so the "nothing left" checks below can fail).
      assert.equal((await hostPodLinks(node)).length, 2, "expected one host veth per pod");
      for (const p of pods) {
        assert.ok((await nodeObjectsFor(node, p.ip)).length > 0, `no route/rule for ${p.ip}`);
      }

      // Connectivity: node -> pod (a kubelet probe) for both pods.
      for (const p of pods) {
        assert.ok(
          await node.ping(node.nodePath, p.ip),
          `node cannot ping pod ${p.pool} at ${p.ip}`,
        );
      }
      // A workload container in the public pod reaches the node and the other pod.
      const ctrId = (await containerd.crictlOk([
        "create",
        publicId,
        await containerd.containerConfig("app"),
        await containerd.podConfig("web", { "vpcni.io/pool": "public" }),
      ])).trim();
      await containerd.crictlOk(["start", ctrId]);
      for (const to of [node.nodeIp, pods[1].ip]) {
        const r = await containerd.crictl(["exec", ctrId, "ping", "-c", "1", "-W", "2", to]);
        assert.equal(r.code, 0, `workload in pod public cannot ping ${to}: ${r.stdout}${r.stderr}`);
      }

      // A pool nobody configured: containerd reports the plugin's error and runs no sandbox,
      // and the failed ADD leaves no address taken and nothing on the node.
      const linksBefore = await hostPodLinks(node);
      const bad = await containerd.crictl([
        "runp",
        await containerd.podConfig("typo", { "vpcni.io/pool": "pubilc" }),
      ]);
      assert.notEqual(bad.code, 0, "a sandbox with an unknown pool must not start");
      assert.match(
        bad.stderr,
        /pubilc/,
        `containerd's error does not name the pool: ${bad.stderr}`,
      );
      assert.deepEqual(await hostPodLinks(node), linksBefore, "the failed ADD left a host veth");
      const afterBad = await nodeCheckpoint(node);
      assert.equal(afterBad.allocations.length, 2, "the failed ADD kept an allocation");
      assert.equal(
        (await containerd.crictlOk(["pods", "-q"])).trim().split("\n").length,
        2,
        "a sandbox for the failed pod is listed",
      );

      // Stopping a sandbox tears its network down: every address goes back (into cooldown)
      // and nothing is left on the node. Removing it then drops the sandbox itself.
      for (const p of pods) await containerd.crictlOk(["stopp", p.id]);
      const after = await nodeCheckpoint(node);
      for (const p of pods) {
        assert.equal(
          after.allocations.find((x) => x.containerId === p.id),
          undefined,
          `sandbox ${p.id} is gone but its allocation of ${p.ip} is not`,
        );
        assert.ok(after.cooldowns.some((c) => c.ip === p.ip), `${p.ip} was not put in cooldown`);
        assert.deepEqual(await nodeObjectsFor(node, p.ip), [], `objects left for ${p.ip}`);
        assert.deepEqual(await cniCacheFor(p.id), [], "libcni's cache still holds the sandbox");
        // Still in the VPC (the daemon keeps warm IPs), but no longer a pod's.
        assert.ok(node.whereIs(p.ip), `${p.ip} vanished from the ENI`);
      }
      assert.deepEqual(await hostPodLinks(node), [], "host veths left in the node");
      for (const p of pods) await containerd.crictlOk(["rmp", p.id]);
      assert.deepEqual(await containerd.podNetnsLeft(), [], "pod netns left mounted");
      assert.equal((await containerd.crictlOk(["pods", "-q"])).trim(), "");
    } finally {
      if (containerd) cleanupProblems = await containerd.close();
      await node.close();
    }
    assert.deepEqual(cleanupProblems, [], "cleanup found leftovers");
    const ns = await run(["ip", "netns", "list"]);
    assert.doesNotMatch(ns.stdout, new RegExp(`^${TAG}-`, "m"), "namespaces left behind");
  },
});
