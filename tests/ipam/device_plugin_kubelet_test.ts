/**
 * The device plugin against a real kubelet (standalone, with containerd: see
 * tests/helpers/kubelet_standalone.ts) and the real daemon on the simulator: the kubelet
 * takes the registrations, its pod-resources API shows each pool's capacity as allocatable
 * devices, the capacity follows the ENI limit, a full subnet and deleted pods within seconds,
 * the kubelet refuses a pod that asks for a pool with no room, a pod's pool comes from the
 * device the kubelet gave it, and a restarted kubelet gets the registrations back.
 *
 * Skipped (with the reason) where `tools/dev` has not built the kubelet.
 */
import assert from "node:assert/strict";
import type { IpamResponse } from "../../proto/ipam.ts";
import { createAwsCloud } from "../../ipam/aws_cloud.ts";
import {
  addReq,
  delReq,
  eventually,
  INSTANCE,
  standardScenario,
  startStack,
  SUBNETS,
} from "./harness.ts";
import { KUBELET_VERSION, kubeletBin, StandaloneKubelet } from "../helpers/kubelet_standalone.ts";

const MAX_ENIS = 3;
const PER_ENI = 3; // 4 addresses per ENI, one its own
/** How long a capacity change may take to reach the kubelet ("within seconds"; a bound for a noisy machine). */
const UPDATE_BOUND_MS = 15_000;

const built = kubeletBin() !== undefined;
if (!built) {
  console.warn(`kubelet ${KUBELET_VERSION} not built here: device_plugin_kubelet_test skipped`);
}

function allocation(r: IpamResponse) {
  assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
  return r.allocation;
}

Deno.test({
  name: "device plugin with a real kubelet: capacity, updates, admission, pod pools, restart",
  ignore: !built,
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  const kubelet = await StandaloneKubelet.start("kdp");
  const stack = await startStack(standardScenario({ maxEnis: MAX_ENIS, ipv4PerEni: 4 }), {
    devicePlugin: "on",
    devicePluginDir: kubelet.devicePluginDir,
    podResourcesSocket: kubelet.podResourcesSocket,
    pools: [
      { name: "a", warmEnis: 0, ipCooldownSeconds: 1 },
      // b always holds 2 addresses on its own ENI: the warm loop never gives the spare back,
      // so what b holds free is the same at every step below.
      {
        name: "b",
        subnets: { ids: [SUBNETS.tiny] },
        warmEnis: 0,
        minimumIps: 2,
        ipCooldownSeconds: 1,
      },
    ],
  }).catch(async (e) => {
    await kubelet.close();
    throw e;
  });
  const devicesOf = async (resource: string) => (await kubelet.allocatable()).get(resource) ?? [];
  const expectCount = async (resource: string, count: number, why: string) => {
    let last = -1;
    const ok = await eventually(
      async () => (last = (await devicesOf(resource)).length) === count,
      UPDATE_BOUND_MS,
    );
    assert.ok(
      ok,
      `${why}: the kubelet shows ${last} of ${resource}, want ${count}\n${await kubelet.logTail(
        10,
      )}`,
    );
  };
  const podListed = async (name: string) =>
    (await kubelet.listPods()).find((p) => p.name === `${name}-vpcni-node`);
  // The kubelet lists a pod as soon as it knows it, before admission has handed it devices
  // (a window that widened after a kubelet restart): admitted means listed with its device.
  const admitted = async (name: string) =>
    (await podListed(name))?.containers.some((c) =>
      c.devices.some((d) => d.deviceIds.length > 0)
    ) ??
      false;
  try {
    // a holds the primary ENI and may add one more (b's ENI takes the second index); b holds
    // 2 addresses, has 1 empty slot, and may add the third ENI too (both count that index).
    await expectCount("vpcni.io/a", (MAX_ENIS - 1) * PER_ENI, "registered, a");
    await expectCount("vpcni.io/b", 2 + 1 + PER_ENI, "registered, b");

    // Static pods asking for one device each: the kubelet admits them and hands out devices.
    await kubelet.addStaticPod("pa", { "vpcni.io/a": 1 });
    await kubelet.addStaticPod("pb", { "vpcni.io/b": 1 });
    assert.ok(
      await eventually(async () => await admitted("pa") && await admitted("pb"), 30_000),
      await kubelet.logTail(20),
    );
    const paDevice = (await podListed("pa"))!.containers[0].devices[0];
    assert.equal(paDevice.resourceName, "vpcni.io/a");

    // The ADD the plugin would send for them: no annotation, the device names the pool.
    const pa = allocation(await stack.call({ ...addReq("pa"), podName: "pa-vpcni-node" }));
    assert.equal(pa.pool, "a");
    const wrong = await stack.call({
      ...addReq("pb", { "vpcni.io/pool": "a" }),
      podName: "pb-vpcni-node",
    });
    assert.ok(!wrong.ok && wrong.code === 7, JSON.stringify(wrong));
    assert.match(
      wrong.msg,
      /vpcni.io\/pool="a" picks pool "a", but the pod requests resource vpcni.io\/b/,
    );
    const pb = allocation(await stack.call({ ...addReq("pb"), podName: "pb-vpcni-node" }));
    assert.equal(pb.pool, "b");
    assert.equal(pb.eni.subnetId, SUBNETS.tiny);

    // Pods of a without a device (annotation) fill the primary ENI and one more: the
    // instance's three ENIs are taken, b keeps only the empty slots of its own ENI.
    for (let i = 0; i < 4; i++) {
      allocation(await stack.call(addReq(`x${i}`, { "vpcni.io/pool": "a" })));
    }
    // pb's device, plus the other addresses b's one ENI holds or can still take.
    await expectCount("vpcni.io/b", PER_ENI, "ENI limit reached");

    // Someone else's ENI takes every free address of the tiny subnet: b can host no one
    // more; its one device stays listed, held by pb.
    const sim = stack.sim;
    const tiny = sim.state.subnets.get(SUBNETS.tiny)!;
    const cloud = await createAwsCloud({
      ec2Endpoint: sim.ec2Endpoint,
      imdsEndpoint: sim.imdsEndpointFor(INSTANCE),
    });
    const foreign = await cloud.createEni({
      subnetId: SUBNETS.tiny,
      securityGroupIds: ["sg-0a000001"],
      description: "another team's",
      tags: {},
      clientToken: crypto.randomUUID(),
      secondaryIpCount: sim.state.availableIps(tiny) - 1,
    });
    assert.equal(sim.state.availableIps(tiny), 0);
    // Left: pb's device and the one free address b holds; its empty slot cannot be filled.
    const bFree = 1;
    await expectCount("vpcni.io/b", 1 + bFree, "subnet exhausted");

    // The kubelet now refuses a pod that asks for more of b than is left, and admits one
    // that asks for what is left.
    await kubelet.addStaticPod("pb2", { "vpcni.io/b": bFree + 1 });
    await kubelet.addStaticPod("pa2", { "vpcni.io/a": 1 });
    assert.ok(await eventually(() => admitted("pa2"), 30_000), "pa2 admitted");
    const refused = (text: string) =>
      text.split("\n").some((l) =>
        l.includes("pb2-vpcni-node") && l.includes("devices unavailable for vpcni.io/b")
      );
    assert.ok(
      await eventually(async () => refused(await Deno.readTextFile(kubelet.log)), 10_000),
      `the kubelet did not refuse pb2:\n${await kubelet.logTail(15)}`,
    );
    assert.equal(await podListed("pb2"), undefined, "pb2 does not run");
    await kubelet.removeStaticPod("pb2");

    // The subnet frees up, then the annotated pods go: their ENI is released and b may
    // again add an ENI of its own.
    await cloud.deleteEni(foreign.id);
    await expectCount("vpcni.io/b", PER_ENI, "subnet free again, ENI limit still reached");
    for (let i = 0; i < 4; i++) await stack.call(delReq(`x${i}`));
    await expectCount("vpcni.io/b", 2 * PER_ENI, "pods deleted, their ENI released");
    cloud.close?.();

    // A kubelet restart wipes the device-plugin directory; the daemon registers again and
    // the devices pods hold stay valid.
    const before = await devicesOf("vpcni.io/a");
    await kubelet.stopProcess();
    await kubelet.startProcess();
    await expectCount("vpcni.io/a", before.length, "after the kubelet restarted");
    const after = await devicesOf("vpcni.io/a");
    assert.ok(after.includes(paDevice.deviceIds[0]), "pa's device is still advertised");
    // pod-resources answers the restarted kubelet's pods at once: a new pod of b gets b.
    await kubelet.addStaticPod("pb3", { "vpcni.io/b": 1 });
    assert.ok(await eventually(() => admitted("pb3"), 30_000), "pb3 admitted");
    // Until the restarted kubelet answers pod-resources, the ADD is told to try again, as the
    // runtime would; it must then get b, never the default pool.
    let pb3Answer = await stack.call({ ...addReq("pb3"), podName: "pb3-vpcni-node" });
    for (let i = 0; i < 15 && !pb3Answer.ok && pb3Answer.code === 11; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      pb3Answer = await stack.call({ ...addReq("pb3"), podName: "pb3-vpcni-node" });
    }
    const pb3 = allocation(pb3Answer);
    assert.equal(pb3.pool, "b", "not the default pool: the restarted kubelet was asked");
    const view = await stack.introspect<{ registrations: number; registered: boolean }>(
      "/v1/device-plugin",
    );
    assert.ok(view.registered && view.registrations >= 2, JSON.stringify(view));
  } finally {
    await stack.close();
    const problems = await kubelet.close();
    assert.deepEqual(problems, []);
  }
});
