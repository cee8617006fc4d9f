/**
 * `deno task test:k8s`: vpcni under a real one-node Kubernetes cluster (kubelet,
 * kube-apiserver, controller manager, scheduler and kube-proxy v1.34, etcd, containerd 1.6)
 * on the simulated VPC. The cluster comes up once (tests/helpers/k8s_cluster.ts); the tests
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
import { BUSYBOX_IMAGE, LaneCluster, NODE_NAME } from "../helpers/k8s_cluster.ts";
import { INTERNAL_SUBNET, LANE_INSTANCE, PUBLIC_SUBNET, whereIs } from "../helpers/k8s_world.ts";
import {
  editedExample,
  EXAMPLE_DAEMONSET,
  httpGetScript,
  webDeployment,
  webPod,
  webService,
} from "../helpers/k8s_workloads.ts";
import { buildVpcniImage } from "../helpers/k8s_image.ts";
import {
  apply,
  checkpointIps,
  execIn,
  inCidr,
  isReady,
  nodeObjectsFor,
  type PodJson,
  podLinks,
  pods,
  readyPods,
} from "../helpers/k8s_inspect.ts";
import { kernelHasIpvlan } from "../../cli/demo_node.ts";

const TAG = `vk8s${Deno.pid % 100000}`;
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
    "Ready and the node turns Ready",
  ...opts,
  async fn() {
    assert.equal(Deno.uid(), 0, "the Kubernetes lane needs root (namespaces, mounts, cgroups)");
    imageDir = await Deno.makeTempDir({ prefix: `${TAG}-image-` });
    const image = await buildVpcniImage(imageDir);
    imageName = image.name;
    cluster = await LaneCluster.start({ tag: TAG, images: [image.path] });
    const c = cluster;
    console.log(`k8s lane: cluster up in ${(c.bringUpMs / 1000).toFixed(1)} s`);
    const example = editedExample(await Deno.readTextFile(EXAMPLE_DAEMONSET), {
      ec2Endpoint: c.world.ec2Url,
      imdsEndpoint: c.world.imdsUrl,
      datapath: kernelHasIpvlan(TAG) ? undefined : "veth",
    });
    assert.match(example, new RegExp(`image: ${imageName.replaceAll(".", "\\.")}`));
    // The simulator has no instance profile to hand out: keys in the optional Secret the
    // example's daemon reads (its header says so).
    await c.kubectlOk([
      "-n",
      "kube-system",
      "create",
      "secret",
      "generic",
      "vpcni-aws-credentials",
      "--from-literal=AWS_ACCESS_KEY_ID=lane",
      "--from-literal=AWS_SECRET_ACCESS_KEY=lane",
    ]);
    await c.kubectlOk(["apply", "-f", "-"], example);
    const daemon = await readyPods(c, "app.kubernetes.io/name=vpcni", 1, 180_000, "kube-system");
    assert.equal(daemon[0].spec.nodeName, NODE_NAME);
    await c.waitFor("the node to turn Ready", 60_000, async () => {
      const n = await c.getJson<{ status: { conditions: { type: string; status: string }[] } }>(
        ["node", NODE_NAME],
      );
      return n.status.conditions.some((x) => x.type === "Ready" && x.status === "True");
    });
    const conflist = await c.node.run(["cat", "/etc/cni/net.d/10-vpcni.conflist"]);
    assert.equal(conflist.code, 0, "the init container wrote the conflist on the node");
    assert.deepEqual(
      JSON.parse(conflist.stdout).plugins.map((p: { type: string }) => p.type),
      ["vpcni", "portmap", "bandwidth"],
    );
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
      webDeployment({ name: "web-public", replicas: 5, image: BUSYBOX_IMAGE, pool: "public" }),
      webDeployment({ name: "web-internal", replicas: 5, image: BUSYBOX_IMAGE }),
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
        assert.equal(home?.instanceId, LANE_INSTANCE, `EC2 says ${ip} is on the node's ENI`);
      }
    }
    // What the scale-to-0 test expects gone is there now: a host-side link per pod, and
    // routes naming each pod's address.
    assert.equal((await podLinks(c)).length, 10, "one host-side link per pod");
    for (const ip of ips) assert.notDeepEqual(await nodeObjectsFor(c, ip), [], `routes to ${ip}`);
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
    const ruleset = await c.node.run(["nft", "list", "table", "ip", "kube-proxy"]);
    assert.match(ruleset.stdout, new RegExp(svc.spec.clusterIP.replaceAll(".", "\\.")));
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
    const fresh = await readyPods(c, "app.kubernetes.io/name=vpcni", 1, 120_000, "kube-system");
    assert.notEqual(fresh[0].metadata.name, old[0].metadata.name, "a new daemon pod runs");
    const held = await checkpointIps(c);
    const after = [
      ...await readyPods(c, "app=web-public", 5),
      ...await readyPods(c, "app=web-internal", 5),
    ];
    const map = (l: PodJson[]) =>
      Object.fromEntries(l.map((p) => [p.metadata.name, p.status.podIP]));
    assert.deepEqual(map(after), map(before), "same pods, same addresses");
    for (const p of after) {
      assert.ok(held.includes(p.status.podIP!), `the new daemon holds ${p.status.podIP}`);
      assert.equal(whereIs(c.world.sim, p.status.podIP!)?.instanceId, LANE_INSTANCE);
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
    const gone = [
      ...await pods(c, "app=web-public"),
      ...await pods(c, "app=web-internal"),
    ].map((p) => p.status.podIP!).filter((ip) => ip);
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
    await c.waitFor("the daemon to release the addresses", 30_000, async () => {
      const held = await checkpointIps(c);
      return !gone.some((ip) => held.includes(ip));
    });
    for (const ip of gone) {
      assert.deepEqual(await nodeObjectsFor(c, ip), [], `nothing on the node names ${ip}`);
    }
    assert.deepEqual(await podLinks(c), [], "no host-side pod link left");
    const sandboxes = await c.node.run(["ls", "/run/netns"]);
    assert.equal(sandboxes.stdout.trim(), "", "no pod netns left");
  },
});

Deno.test({
  name: "the scheduler respects the public pool's capacity: of N+1 pods requesting " +
    "vpcni.io/public, N run and one stays Pending with Insufficient vpcni.io/public until " +
    "one goes",
  ...opts,
  async fn() {
    const c = need();
    let n = 0;
    await c.waitFor("the node to advertise vpcni.io/public", 60_000, async () => {
      const node = await c.getJson<{ status: { allocatable: Record<string, string> } }>(
        ["node", NODE_NAME],
      );
      n = Number(node.status.allocatable["vpcni.io/public"] ?? 0);
      return n > 0;
    });
    // A /28 has 11 addresses EC2 hands out; the pool's ENI takes one as its primary.
    assert.ok(n >= 2 && n <= 10, `capacity ${n} fits the public /28`);
    console.log(`k8s lane: vpcni.io/public advertised as ${n}`);
    const names = Array.from({ length: n + 1 }, (_, i) => `capped-${i}`);
    await apply(
      c,
      names.map((name) =>
        webPod({
          name,
          group: "capped",
          image: BUSYBOX_IMAGE,
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
  name: "teardown leaves no netns, mount, process, cgroup or link of the lane behind",
  ...opts,
  async fn() {
    for (const sig of SIGNALS) Deno.removeSignalListener(sig, onSignal);
    if (imageDir) await Deno.remove(imageDir, { recursive: true });
    const c = need();
    const netnsBefore = [c.world.nodeNetns, c.world.fabric.netns];
    const mountNs = c.node.mountNsId;
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
      if (ns === mountNs || cmd.includes(c.dir)) left.push(Number(e.name));
    }
    assert.deepEqual(left, [], "no process of the lane left");
    for (const h of ["/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/pids"]) {
      assert.throws(() => Deno.statSync(`${h}${c.cgroupRoot}`), Deno.errors.NotFound);
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
