/**
 * The device plugin end to end with the real daemon on the simulator and a stand-in kubelet
 * (tests/ipam/kubelet_standin.ts) over real gRPC on unix sockets: registration of one
 * resource per pool, the advertised capacity and its updates (ENI limit reached, pods
 * deleted), a pod's pool taken from its device, and registering again after the kubelet
 * restarts. Also: the CNI plugin's module graph holds no gRPC.
 */
import assert from "node:assert/strict";
import type { IpamResponse } from "../../cni/ipam_protocol.ts";
import { addReq, delReq, eventually, standardScenario, startStack, SUBNETS } from "./harness.ts";
import { type KubeletStandin, podWith, startKubeletStandin } from "./kubelet_standin.ts";

// The instance: 3 ENIs of 4 addresses, so 3 pod addresses per ENI.
const MAX_ENIS = 3;
const PER_ENI = 3;

async function kubeletDir() {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-kubelet-" });
  await Deno.mkdir(`${dir}/device-plugins`);
  return dir;
}

function ipOf(r: IpamResponse) {
  assert.ok(r.ok && "allocation" in r, JSON.stringify(r));
  return r.allocation;
}

/** Waits until the stand-in holds `count` devices of `resource`; fails with what it saw. */
async function expectDevices(k: KubeletStandin, resource: string, count: number, why: string) {
  const ok = await eventually(() => k.devices(resource)?.length === count, 8000);
  assert.ok(ok, `${why}: ${resource} shows ${k.devices(resource)?.length} devices, want ${count}`);
}

Deno.test("device plugin: one resource per pool, capacity that follows the ENI limit and pods", async () => {
  const kdir = await kubeletDir();
  const kubelet = await startKubeletStandin(`${kdir}/device-plugins`, `${kdir}/pod-resources.sock`);
  const stack = await startStack(standardScenario({ maxEnis: MAX_ENIS, ipv4PerEni: 4 }), {
    devicePlugin: "on",
    devicePluginDir: `${kdir}/device-plugins`,
    podResourcesSocket: `${kdir}/pod-resources.sock`,
    pools: [
      { name: "a", warmEnis: 0, ipCooldownSeconds: 1 },
      { name: "b", subnets: { ids: [SUBNETS.tiny] }, warmEnis: 0 },
    ],
  });
  try {
    assert.ok(await eventually(() => kubelet.registrations.length === 2, 8000), "registered");
    assert.deepEqual(
      kubelet.registrations.map((r) => [r.request.resourceName, r.request.endpoint]).sort(),
      [["vpcni.io/a", "vpcni-a.sock"], ["vpcni.io/b", "vpcni-b.sock"]],
    );
    assert.equal(kubelet.registrations[0].request.version, "v1beta1");
    // a holds the primary ENI and may add the two others; b (the /28: 11 free addresses) may
    // add two ENIs, each taking 1 address for itself and 3 for pods.
    await expectDevices(kubelet, "vpcni.io/a", MAX_ENIS * PER_ENI, "a at start");
    await expectDevices(kubelet, "vpcni.io/b", 2 * PER_ENI, "b at start");
    const ids = kubelet.devices("vpcni.io/a")!.map((d) => d.id);
    assert.equal(new Set(ids).size, ids.length, "device ids are distinct");
    assert.ok(kubelet.devices("vpcni.io/a")!.every((d) => d.health === "Healthy"));

    // Seven pods of a, each holding a device (as the kubelet would have allocated), take the
    // primary ENI and two new ones: the instance's ENI limit is reached, b can host nothing.
    for (let i = 0; i < 7; i++) {
      kubelet.pods.push(podWith("default", `a${i}`, "vpcni.io/a", [ids[i]]));
      const alloc = ipOf(await stack.call(addReq(`a${i}`)));
      assert.equal(alloc.pool, "a", "the device picks the pool, no annotation needed");
    }
    await expectDevices(kubelet, "vpcni.io/b", 0, "ENI limit reached");
    await expectDevices(kubelet, "vpcni.io/a", MAX_ENIS * PER_ENI, "a: 7 held + 2 room");
    assert.deepEqual(
      kubelet.devices("vpcni.io/a")!.map((d) => d.id).sort(),
      [...ids].sort(),
      "ids stay the same while the count does",
    );
    const view = await stack.introspect<
      { pools: { pool: string; devices: number; room: number }[] }
    >(
      "/v1/device-plugin",
    );
    assert.deepEqual(view.pools.map((p) => [p.pool, p.devices, p.room]), [["a", 9, 2], [
      "b",
      0,
      0,
    ]]);

    // The pods go: their addresses cool down, the warm loop gives the empty ENIs back, and
    // b can grow again.
    for (let i = 0; i < 7; i++) {
      kubelet.pods = kubelet.pods.filter((p) => p.name !== `a${i}`);
      const r = await stack.call(delReq(`a${i}`));
      assert.ok(r.ok && "released" in r && r.released.length === 1, JSON.stringify(r));
    }
    await expectDevices(kubelet, "vpcni.io/b", 2 * PER_ENI, "ENIs released after the pods went");
  } finally {
    await stack.close();
    await kubelet.close();
    await Deno.remove(kdir, { recursive: true });
  }
});
