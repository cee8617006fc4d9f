/**
 * The Kubernetes lane's checks between its two nodes, run by tests/k8s/lane.k8s.ts against
 * the web Deployments (spread over both nodes) and the `web-internal` Service its previous
 * test made: pod → pod on the other node in each pool, through the VPC fabric; node → pod
 * on the other node; the Service's ClusterIP from each node; a Service name through the
 * cluster's DNS.
 *
 * @module
 */
import assert from "node:assert/strict";
import { BUSYBOX_IMAGE, type LaneCluster } from "../helpers/k8s_cluster.ts";
import { whereIs } from "../helpers/k8s_world.ts";
import { clientPod, httpGetScript } from "../helpers/k8s_workloads.ts";
import { apply, execIn, packetsIntoEni, type PodJson, readyPods } from "../helpers/k8s_inspect.ts";

/** The web pods of `app` on each node: [on the first node, on the second]. */
async function byNode(c: LaneCluster, app: string): Promise<[PodJson[], PodJson[]]> {
  const all = await readyPods(c, `app=${app}`, 5);
  const on = (i: number) => all.filter((p) => p.spec.nodeName === c.nodes[i].name);
  return [on(0), on(1)];
}

/** Runs every check; throws the first that fails. */
export async function crossNodeChecks(c: LaneCluster): Promise<void> {
  const [pub1, pub2] = await byNode(c, "web-public");
  const [int1, int2] = await byNode(c, "web-internal");
  for (const l of [pub1, pub2, int1, int2]) assert.ok(l.length >= 2, "spread over both nodes");
  // Pod → pod on the other node, in each pool and both ways. The answer must have
  // crossed the fabric: the VPC delivered packets to the ENI holding the target's address.
  for (
    const [from, to] of [[pub1[0], pub2[0]], [pub2[1], pub1[1]], [int1[0], int2[0]], [
      int2[1],
      int1[1],
    ]]
  ) {
    const eni = whereIs(c.world.sim, to.status.podIP!)!.eniId;
    const before = await packetsIntoEni(c, eni);
    const r = await execIn(c, from.metadata.name, httpGetScript(to.status.podIP!, 8080));
    assert.equal(r.code, 0, `${from.metadata.name} → ${to.metadata.name}: ${r.stderr}`);
    assert.match(r.stdout, new RegExp(to.metadata.name));
    assert.ok(
      (await packetsIntoEni(c, eni)) > before,
      `the VPC carried ${from.spec.nodeName} → ${to.spec.nodeName} into ${eni}`,
    );
  }
  // Node → pod: kubelet on node 2 probes its pods (they are Ready above), and a
  // hostNetwork pod on node 1, which sees node 1's host name, reaches pods on node 2.
  await apply(c, [
    clientPod({
      name: "node1-host",
      image: BUSYBOX_IMAGE,
      node: c.nodes[0].name,
      hostNetwork: true,
    }),
    clientPod({ name: "dns-client", image: BUSYBOX_IMAGE, node: c.nodes[1].name }),
  ]);
  await readyPods(c, "app=client", 2);
  const host = await execIn(c, "node1-host", "hostname");
  assert.equal(host.stdout.trim(), c.nodes[0].name, "a hostNetwork pod reports its node's name");
  for (const to of [pub2[0], int2[0]]) {
    const r = await execIn(c, "node1-host", httpGetScript(to.status.podIP!, 8080));
    assert.equal(r.code, 0, `node 1 → ${to.metadata.name} on node 2: ${r.stderr}`);
    assert.match(r.stdout, new RegExp(to.metadata.name));
  }
  // The ClusterIP, from a pod on each node: answers come from pods on both nodes.
  const svc = await c.getJson<{ spec: { clusterIP: string } }>(["service", "web-internal"]);
  const nodeOfName = new Map([...int1, ...int2].map((p) => [p.metadata.name, p.spec.nodeName]));
  for (const from of [pub1[0], pub2[0]]) {
    const servedBy = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const r = await execIn(c, from.metadata.name, httpGetScript(svc.spec.clusterIP, 80));
      assert.equal(r.code, 0, `${from.metadata.name} → ${svc.spec.clusterIP}:80: ${r.stderr}`);
      const name = [...nodeOfName.keys()].find((n) => r.stdout.includes(n));
      assert.ok(name, `the Service answered with a web-internal pod's name: ${r.stdout}`);
      servedBy.add(nodeOfName.get(name)!);
    }
    // 20 answers all from one node's endpoints: p < (3/5)^20 ≈ 4·10⁻⁵.
    assert.equal(servedBy.size, 2, `${from.spec.nodeName}'s pod reached endpoints on both nodes`);
  }
  // DNS: the pod's resolv.conf names kube-dns, and CoreDNS answers the Service's name.
  const conf = await execIn(c, "dns-client", "cat /etc/resolv.conf");
  assert.match(conf.stdout, /nameserver 10\.100\.0\.10/);
  const fqdn = "web-internal.default.svc.cluster.local";
  const ns = await execIn(c, "dns-client", `/bin/busybox nslookup ${fqdn}`);
  assert.equal(ns.code, 0, `nslookup ${fqdn}: ${ns.stdout}${ns.stderr}`);
  assert.match(ns.stdout, new RegExp(`Address:\\s*${svc.spec.clusterIP.replaceAll(".", "\\.")}`));
  await c.kubectlOk(["delete", "pod", "-l", "app=client", "--wait=true"]);
}
