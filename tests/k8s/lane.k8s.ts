/**
 * `deno task test:k8s`: vpcni under a real two-node Kubernetes cluster (kubelet, kube-proxy
 * and containerd 1.6 on each node; kube-apiserver, controller manager, scheduler v1.34 and
 * etcd on the first; CoreDNS as the cluster's DNS) on the simulated VPC, each node an EC2
 * instance of its own. The cluster comes up once (tests/helpers/k8s_cluster.ts); the tests
 * run in order against it, and the last one tears it down and checks nothing is left.
 *
 * vpcni is deployed the way a user deploys it: the image `deno task image` builds, imported
 * with `ctr -n k8s.io images import`, and `kubectl apply` of
 * examples/kubernetes/vpcni-daemonset.yaml with the edits its header documents.
 *
 * Needs root and `bash tools/dev setup` (Kubernetes binaries, etcd, containerd, runc).
 *
 * @module
 */
import assert from "node:assert/strict";
import { BUSYBOX_IMAGE, LaneCluster } from "../helpers/k8s_cluster.ts";
import { KUBE_DNS_LABEL } from "../helpers/k8s_coredns.ts";
import { INTERNAL_SUBNET, PUBLIC_SUBNET, whereIs } from "../helpers/k8s_world.ts";
import { httpGetScript, webDeployment, webPod, webService } from "../helpers/k8s_workloads.ts";
import { buildVpcniImage } from "../helpers/k8s_image.ts";
import { deployVpcni } from "../helpers/k8s_deploy.ts";
import { crossNodeChecks } from "./cross_node_checks.ts";
import {
  apply,
  checkpointIps,
  daemonGet,
  execIn,
  inCidr,
  isReady,
  nodeObjectsFor,
  nodeOf,
  type PodJson,
  podLinks,
  podNetworkPodsOn,
  pods,
  readyPods,
} from "../helpers/k8s_inspect.ts";

const TAG = `vk8s${Deno.pid % 100000}`;
/** Worker nodes of the lane's cluster. */
const NODES = 2;
const laneStarted = performance.now();
let cluster: LaneCluster | undefined;
let imageName = "";
let imageDir = "";

/** The cluster, or a failure saying bring-up did not happen. */
function need(): LaneCluster {
  if (!cluster) throw new Error("the cluster is not up (see the first test's failure)");
  return cluster;
}

const opts = { sanitizeOps: false, sanitizeResources: false };
const SIGNALS = ["SIGINT", "SIGTERM"] as const;

Deno.test({
  name: "bring-up: the example DaemonSet, pointed at the simulator, runs the vpcni daemon to " +
    "Ready on each of two nodes, the nodes turn Ready and the cluster's DNS runs",
  ...opts,
  async fn() {
    assert.equal(Deno.uid(), 0, "the Kubernetes lane needs root (namespaces, mounts, cgroups)");
    imageDir = await Deno.makeTempDir({ prefix: `${TAG}-image-` });
    const image = await buildVpcniImage(imageDir);
    imageName = image.name;
    cluster = await LaneCluster.start({ tag: TAG, images: [image.path], nodes: NODES });
    const c = cluster;
    console.log(`k8s lane: ${NODES}-node cluster up in ${(c.bringUpMs / 1000).toFixed(1)} s`);
    const { example, daemons: daemon } = await deployVpcni(c, TAG);
    assert.match(example, new RegExp(`image: ${imageName.replaceAll(".", "\\.")}`));
    assert.deepEqual(
      daemon.map((p) => p.spec.nodeName).sort(),
      c.nodes.map((n) => n.name).sort(),
      "one DaemonSet, one daemon pod on each node",
    );
    for (const node of c.nodes) {
      await c.waitFor(`${node.name} to turn Ready`, 60_000, async () => {
        const n = await c.getJson<{ status: { conditions: { type: string; status: string }[] } }>(
          ["node", node.name],
        );
        return n.status.conditions.some((x) => x.type === "Ready" && x.status === "True");
      });
      const conflist = await node.ns.run(["cat", "/etc/cni/net.d/10-vpcni.conflist"]);
      assert.equal(conflist.code, 0, `the init container wrote the conflist on ${node.name}`);
      assert.deepEqual(
        JSON.parse(conflist.stdout).plugins.map((p: { type: string }) => p.type),
        ["vpcni", "portmap", "bandwidth"],
      );
    }
    const dns = await readyPods(c, KUBE_DNS_LABEL, 1, 120_000, "kube-system");
    assert.ok(dns[0].status.podIP, "CoreDNS has a pod address");
    console.log(
      `k8s lane: vpcni daemon Ready ${((performance.now() - laneStarted) / 1000).toFixed(1)} s ` +
        "after the lane started",
    );
  },
});

Deno.test({
  name: "10 replicas in two pools get VPC addresses from their pools' subnets, pass kubelet's " +
    "HTTP readiness probes, and reach each other and a ClusterIP Service through kube-proxy",
  ...opts,
  async fn() {
    const c = need();
    await apply(c, [
      webDeployment({
        name: "web-public",
        replicas: 5,
        image: BUSYBOX_IMAGE,
        pool: "public",
        spread: true,
      }),
      webDeployment({ name: "web-internal", replicas: 5, image: BUSYBOX_IMAGE, spread: true }),
      webService("web-internal"),
    ]);
    const pub = await readyPods(c, "app=web-public", 5);
    const int = await readyPods(c, "app=web-internal", 5);
    const ips = [...pub, ...int].map((p) => p.status.podIP ?? "");
    assert.equal(new Set(ips).size, 10, `ten distinct addresses: ${ips.join(" ")}`);
    for (const [list, subnet] of [[pub, PUBLIC_SUBNET], [int, INTERNAL_SUBNET]] as const) {
      for (const p of list) {
        const ip = p.status.podIP!;
        assert.ok(inCidr(ip, subnet), `${p.metadata.name} got ${ip}, not in ${subnet}`);
        const home = whereIs(c.world.sim, ip);
        assert.equal(
          home?.instanceId,
          nodeOf(c, p).instanceId,
          `EC2 says ${ip} is on an ENI of ${p.spec.nodeName}'s instance`,
        );
      }
    }
    // What the scale-to-0 test expects gone is there now: a host-side link per pod on its
    // node (CoreDNS's pod has one too), and routes naming each pod's address.
    for (const node of c.nodes) {
      const on = await podNetworkPodsOn(c, node);
      assert.equal((await podLinks(node)).length, on.length, `one link per pod on ${node.name}`);
    }
    for (const p of [...pub, ...int]) {
      const ip = p.status.podIP!;
      assert.notDeepEqual(await nodeObjectsFor(nodeOf(c, p), ip), [], `routes to ${ip}`);
    }
    // Pod to pod, across pools.
    const from = pub[0].metadata.name;
    for (const target of [int[0], pub[1]]) {
      const r = await execIn(c, from, httpGetScript(target.status.podIP!, 8080));
      assert.equal(r.code, 0, `${from} → ${target.metadata.name}: ${r.stderr}`);
      assert.match(r.stdout, new RegExp(target.metadata.name));
    }
    // Through the Service's ClusterIP, which only kube-proxy's rules on the node resolve.
    const svc = await c.getJson<{ spec: { clusterIP: string } }>(["service", "web-internal"]);
    const served = new Set<string>();
    for (let i = 0; i < 10; i++) {
      const r = await execIn(c, from, httpGetScript(svc.spec.clusterIP, 80));
      assert.equal(r.code, 0, `${from} → ${svc.spec.clusterIP}:80: ${r.stderr}`);
      const name = int.map((p) => p.metadata.name).find((n) => r.stdout.includes(n));
      assert.ok(name, `the Service answered with a web-internal pod's name: ${r.stdout}`);
      served.add(name);
    }
    // kube-proxy spreads connections over the endpoints (all ten on one: p ≈ 5·10⁻⁷).
    assert.ok(served.size > 1, `the Service reached more than one pod: ${[...served]}`);
    for (const node of c.nodes) {
      const ruleset = await node.ns.run(["nft", "list", "table", "ip", "kube-proxy"]);
      assert.match(ruleset.stdout, new RegExp(svc.spec.clusterIP.replaceAll(".", "\\.")));
    }
  },
});

/** What the lane reads of a pool in the daemon's /v1/pools. */
interface PoolView {
  name: string;
  cooling: number;
  surplus: number;
  shortfall: number;
  growing: boolean;
}

Deno.test({
  name: "across nodes: a pod reaches a pod on the other node in each pool through the VPC " +
    "fabric, node 1 reaches node 2's pods, a ClusterIP with endpoints on both nodes answers " +
    "from both, and a pod resolves a Service's name with the cluster's DNS",
  ...opts,
  async fn() {
    await crossNodeChecks(need());
  },
});

Deno.test({
  name: "a rollout restart of the vpcni DaemonSet under running pods loses no pod's address",
  ...opts,
  async fn() {
    const c = need();
    const before = [
      ...await readyPods(c, "app=web-public", 5),
      ...await readyPods(c, "app=web-internal", 5),
    ];
    const old = await pods(c, "app.kubernetes.io/name=vpcni", "kube-system");
    await c.kubectlOk(["-n", "kube-system", "rollout", "restart", "daemonset/vpcni"]);
    await c.kubectlOk([
      "-n",
      "kube-system",
      "rollout",
      "status",
      "daemonset/vpcni",
      "--timeout=180s",
    ]);
    const fresh = await readyPods(
      c,
      "app.kubernetes.io/name=vpcni",
      NODES,
      120_000,
      "kube-system",
    );
    for (const f of fresh) {
      assert.ok(!old.some((o) => o.metadata.name === f.metadata.name), "new daemon pods run");
    }
    const held = new Map<string, string[]>();
    for (const n of c.nodes) held.set(n.name, await checkpointIps(n));
    const after = [
      ...await readyPods(c, "app=web-public", 5),
      ...await readyPods(c, "app=web-internal", 5),
    ];
    const map = (l: PodJson[]) =>
      Object.fromEntries(l.map((p) => [p.metadata.name, p.status.podIP]));
    assert.deepEqual(map(after), map(before), "same pods, same addresses");
    for (const p of after) {
      const node = nodeOf(c, p);
      assert.ok(
        held.get(node.name)!.includes(p.status.podIP!),
        `the new daemon on ${node.name} holds ${p.status.podIP}`,
      );
      assert.equal(whereIs(c.world.sim, p.status.podIP!)?.instanceId, node.instanceId);
    }
    // A new pod gets an address nobody has, and the old ones still answer.
    await c.kubectlOk(["scale", "deployment/web-internal", "--replicas=6"]);
    const six = await readyPods(c, "app=web-internal", 6);
    const added = six.find((p) => !before.some((b) => b.metadata.name === p.metadata.name))!;
    assert.ok(!before.some((b) => b.status.podIP === added.status.podIP), "no address reused");
    const r = await execIn(c, added.metadata.name, httpGetScript(before[0].status.podIP!, 8080));
    assert.match(r.stdout, new RegExp(before[0].metadata.name));
  },
});

Deno.test({
  name: "scaling to 0 leaves no rule, route, link or reservation of the pods behind",
  ...opts,
  async fn() {
    const c = need();
    const goneOn = new Map<string, string[]>(c.nodes.map((n) => [n.name, []]));
    for (const p of [...await pods(c, "app=web-public"), ...await pods(c, "app=web-internal")]) {
      if (p.status.podIP) goneOn.get(nodeOf(c, p).name)!.push(p.status.podIP);
    }
    const gone = [...goneOn.values()].flat();
    assert.ok(gone.length >= 10);
    await c.kubectlOk([
      "scale",
      "deployment/web-public",
      "deployment/web-internal",
      "--replicas=0",
    ]);
    await c.waitFor(
      "every web pod to be gone",
      90_000,
      async () =>
        (await pods(c, "app=web-public")).length === 0 &&
        (await pods(c, "app=web-internal")).length === 0,
    );
    for (const node of c.nodes) {
      const mine = goneOn.get(node.name)!;
      await c.waitFor(`the daemon on ${node.name} to release the addresses`, 30_000, async () => {
        const held = await checkpointIps(node);
        return !mine.some((ip) => held.includes(ip));
      });
      for (const ip of mine) {
        assert.deepEqual(await nodeObjectsFor(node, ip), [], `nothing on ${node.name} names ${ip}`);
      }
      // What stays is the pods that still run there (CoreDNS's): one link and netns each.
      const staying = (await podNetworkPodsOn(c, node)).length;
      assert.equal((await podLinks(node)).length, staying, `no web pod's link on ${node.name}`);
      const sandboxes = await node.ns.run(["ls", "/run/netns"]);
      const left = sandboxes.stdout.split("\n").filter((l) => l.trim());
      assert.equal(left.length, staying, `no web pod's netns on ${node.name}: ${left}`);
    }
  },
});

Deno.test({
  name: "the scheduler respects the public pool's capacity on the second node: of N+1 pods " +
    "for it requesting vpcni.io/public, N run and one stays Pending with Insufficient " +
    "vpcni.io/public until one goes",
  ...opts,
  async fn() {
    const c = need();
    const target = c.nodes[1];
    // Both nodes' public ENIs share the /28, so what the second node can still get moves
    // while either daemon settles after the last test: addresses cooling, surplus handed
    // back, warm addresses being fetched. Count only once both are still, and the kubelet
    // advertises what the daemon does.
    let n = 0;
    await c.waitFor("both daemons' public pools to settle", 180_000, async () => {
      for (const node of c.nodes) {
        const pools = await daemonGet<PoolView[]>(c, node, "/v1/pools");
        const pub = pools.find((p) => p.name === "public");
        if (!pub || pub.cooling || pub.surplus || pub.shortfall || pub.growing) return false;
      }
      const dp = await daemonGet<{ pools: { pool: string; advertised: number }[] }>(
        c,
        target,
        "/v1/device-plugin",
      );
      const node = await c.getJson<{ status: { allocatable: Record<string, string> } }>(
        ["node", target.name],
      );
      n = Number(node.status.allocatable["vpcni.io/public"] ?? 0);
      return n > 0 && dp.pools.find((p) => p.pool === "public")?.advertised === n;
    });
    // A /28 has 11 addresses EC2 hands out; each node's public ENI takes one as its
    // primary, and the first node keeps some free for its own pods.
    assert.ok(n >= 1 && n <= 9, `capacity ${n} fits the public /28 that two nodes share`);
    console.log(`k8s lane: vpcni.io/public advertised as ${n} on ${target.name}`);
    const names = Array.from({ length: n + 1 }, (_, i) => `capped-${i}`);
    await apply(
      c,
      names.map((name) =>
        webPod({
          name,
          group: "capped",
          image: BUSYBOX_IMAGE,
          node: target.name,
          resources: { "vpcni.io/public": "1" },
        })
      ),
    );
    let pending: PodJson | undefined;
    let running: PodJson[] = [];
    await c.waitFor(`${n} capped pods Ready and one Pending`, 180_000, async () => {
      const all = await pods(c, "app=capped");
      running = all.filter(isReady);
      const waiting = all.filter((p) => p.status.phase === "Pending" && !p.spec.nodeName);
      pending = waiting[0];
      return running.length === n && waiting.length === 1;
    });
    const why = pending!.status.conditions?.find((x) => x.type === "PodScheduled");
    assert.equal(why?.status, "False");
    assert.match(why?.message ?? "", /Insufficient vpcni\.io\/public/);
    for (const p of running) {
      assert.equal(p.spec.nodeName, target.name);
      assert.ok(
        inCidr(p.status.podIP!, PUBLIC_SUBNET),
        `${p.metadata.name} (no annotation, requests vpcni.io/public) got ${p.status.podIP}`,
      );
    }
    await c.kubectlOk(["delete", "pod", running[0].metadata.name, "--wait=true"]);
    await c.waitFor(`${pending!.metadata.name} to run`, 180_000, async () => {
      const p = await c.getJson<PodJson>(["pod", pending!.metadata.name]);
      return isReady(p) && inCidr(p.status.podIP ?? "", PUBLIC_SUBNET);
    });
    await c.kubectlOk(["delete", "pod", "-l", "app=capped", "--wait=true"]);
  },
});

Deno.test({
  name: "teardown leaves no netns, mount, process, cgroup or link of either node behind",
  ...opts,
  async fn() {
    for (const sig of SIGNALS) Deno.removeSignalListener(sig, onSignal);
    if (imageDir) await Deno.remove(imageDir, { recursive: true });
    const c = need();
    const netnsBefore = [...c.world.nodes.map((n) => n.netns), c.world.fabric.netns];
    const mountNs = c.nodes.map((n) => n.ns.mountNsId);
    cluster = undefined;
    const problems = await c.close();
    assert.deepEqual(problems, []);
    const netns = [...Deno.readDirSync("/run/netns")].map((e) => e.name);
    for (const n of netnsBefore) assert.ok(!netns.includes(n), `netns ${n} removed`);
    const mounts = await Deno.readTextFile("/proc/self/mountinfo");
    assert.ok(!mounts.includes(c.dir), "no mount under the lane dir");
    for (const n of netnsBefore) assert.ok(!mounts.includes(`/run/netns/${n} `), `${n} unmounted`);
    const left: number[] = [];
    for await (const e of Deno.readDir("/proc")) {
      if (!/^\d+$/.test(e.name)) continue;
      const ns = await Deno.readLink(`/proc/${e.name}/ns/mnt`).catch(() => "");
      const cmd = await Deno.readTextFile(`/proc/${e.name}/cmdline`).catch(() => "");
      if (mountNs.includes(ns) || cmd.includes(c.dir)) left.push(Number(e.name));
    }
    assert.deepEqual(left, [], "no process of the lane left");
    for (const h of ["/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/pids"]) {
      for (const n of c.nodes) {
        assert.throws(() => Deno.statSync(`${h}${n.cgroupRoot}`), Deno.errors.NotFound);
      }
    }
    console.log(
      `k8s lane: total ${((performance.now() - laneStarted) / 1000).toFixed(1)} s ` +
        `(cluster up in ${(c.bringUpMs / 1000).toFixed(1)} s)`,
    );
  },
});

// An interrupted run still takes the cluster down.
function onSignal() {
  const c = cluster;
  cluster = undefined;
  (c ? c.close() : Promise.resolve([])).finally(() => Deno.exit(130));
}
for (const sig of SIGNALS) Deno.addSignalListener(sig, onSignal);
