/**
 * The device plugin end to end with the real daemon on the simulator and a stand-in kubelet
 * (tests/ipam/kubelet_standin.ts) over real gRPC on unix sockets: registration of one
 * resource per pool, the advertised capacity and its updates (ENI limit reached, pods
 * deleted), a pod's pool taken from its device, and registering again after the kubelet
 * restarts. Also: the CNI plugin's module graph holds no gRPC.
 */
import assert from "node:assert/strict";
import type { IpamResponse } from "../../proto/ipam.ts";
import {
  addReq,
  delReq,
  eventually,
  type Stack,
  standardScenario,
  startStack,
  SUBNETS,
} from "./harness.ts";
import { checkDevicePlugin, fetchDevicePluginView } from "../../doctor/checks_device_plugin.ts";
import { type KubeletStandin, podWith, startKubeletStandin } from "./kubelet_standin.ts";
import { denoInfo } from "../helpers/deno_info.ts";

// The instance: 3 ENIs of 4 addresses, so 3 pod addresses per ENI.
const MAX_ENIS = 3;
const PER_ENI = 3;

async function kubeletDir() {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-kubelet-" });
  await Deno.mkdir(`${dir}/device-plugins`);
  return dir;
}

const daemonUrl = (stack: Stack) => `http://127.0.0.1:${stack.daemon.introspectionAddr.port}`;

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

Deno.test("device plugin: auto stays off without the kubelet's directory", async () => {
  const kdir = await Deno.makeTempDir({ prefix: "vpcni-kubelet-" });
  const stack = await startStack(standardScenario(), {
    devicePlugin: "auto",
    devicePluginDir: `${kdir}/device-plugins`,
  });
  try {
    const view = await stack.introspect<{ enabled: boolean; reason: string }>("/v1/device-plugin");
    assert.equal(view.enabled, false);
    assert.match(view.reason, /no kubelet answers on .*\/device-plugins\/kubelet\.sock/);
    const doctor = checkDevicePlugin(await fetchDevicePluginView(daemonUrl(stack), 5000));
    assert.equal(doctor.status, "skip");
    assert.match(doctor.found, /^off: /);
    assert.deepEqual(doctor.details, [view.reason]);
    assert.deepEqual([...Deno.readDirSync(kdir)], [], "nothing made in its place");
  } finally {
    await stack.close();
    await Deno.remove(kdir, { recursive: true });
  }
});

Deno.test("device plugin: without an answer from pod-resources, ADD says try again, never guesses a pool", async () => {
  const kdir = await kubeletDir();
  // Registration is served, pod-resources is not: its socket path leads nowhere.
  const kubelet = await startKubeletStandin(`${kdir}/device-plugins`, `${kdir}/elsewhere.sock`);
  const stack = await startStack(standardScenario({ maxEnis: MAX_ENIS, ipv4PerEni: 4 }), {
    devicePlugin: "on",
    devicePluginDir: `${kdir}/device-plugins`,
    podResourcesSocket: `${kdir}/pod-resources.sock`,
    pools: [{ name: "a", warmEnis: 0 }, {
      name: "b",
      subnets: { ids: [SUBNETS.dmz] },
      warmEnis: 0,
    }],
  });
  try {
    await expectDevices(
      kubelet,
      "vpcni.io/b",
      2 * PER_ENI,
      "registered while pod-resources is away",
    );
    // The pod may hold a device of either pool: an annotation or the default pool could hand
    // it the other pool's address, so the runtime is told to try again, and nothing is held.
    const started = Date.now();
    for (const r of [addReq("p0", { "vpcni.io/pool": "b" }), addReq("p1")]) {
      const answer = await stack.call(r);
      assert.ok(!answer.ok && answer.code === 11, JSON.stringify(answer));
      assert.match(answer.msg, /pod-resources API did not say which pool default\/p[01] holds/);
    }
    assert.ok(Date.now() - started < 15_000, "the kubelet's silence did not hold the ADDs up");
    const held = await stack.introspect<unknown[]>("/v1/allocations");
    assert.deepEqual(held, [], "a refused ADD holds nothing");
    const view = await stack.introspect<{ podResourcesKnown: boolean; podResourcesError?: string }>(
      "/v1/device-plugin",
    );
    assert.equal(view.podResourcesKnown, false);
    assert.ok(view.podResourcesError, JSON.stringify(view));
    // No pod can start while this lasts: the doctor fails the check, as /readyz says.
    const doctor = checkDevicePlugin(await fetchDevicePluginView(daemonUrl(stack), 5000));
    assert.equal(doctor.status, "fail", JSON.stringify(doctor));
    assert.match(doctor.details?.[0] ?? "", /pod-resources API at \S+ does not answer/);
  } finally {
    await stack.close();
    await kubelet.close();
    await Deno.remove(kdir, { recursive: true });
  }
});

/** Modules a program loads from `root` (`deno info --json`), with or without dynamic imports. */
async function moduleGraph(root: string, o: { dynamic: boolean }): Promise<string[]> {
  const info = await denoInfo(root);
  const bySpec = new Map(info.modules.map((m) => [m.specifier, m]));
  const seen = new Set<string>();
  const visit = (spec: string) => {
    const s = info.redirects[spec] ?? spec;
    if (seen.has(s)) return;
    seen.add(s);
    for (const d of bySpec.get(s)?.dependencies ?? []) {
      if (d.code && (o.dynamic || !d.isDynamic)) visit(d.code.specifier);
    }
  };
  info.roots.forEach(visit);
  return [...seen];
}

const isGrpc = (spec: string) => /@grpc\/|\/ipam\/kubelet\/(grpc|link)\.ts$/.test(spec);

Deno.test("device plugin: the CNI plugin never loads gRPC; the daemon only when it is on", async () => {
  // The thin plugin (from source and bundled) and the whole plugin it may load.
  for (
    const [root, holds] of [
      ["cni/entry.ts", "/cni/thin.ts"],
      ["main.ts", "/cni/thin.ts"],
      ["cli/plugin_full.ts", "/cni/plugin.ts"],
    ]
  ) {
    const graph = await moduleGraph(root, { dynamic: true });
    assert.ok(graph.some((s) => s.endsWith(holds)), `${root}: the graph was read`);
    assert.deepEqual(graph.filter(isGrpc), [], `${root} loads no gRPC module`);
  }
  const daemonAll = await moduleGraph("ipam/daemon.ts", { dynamic: true });
  assert.ok(daemonAll.some((s) => s.includes("@grpc/grpc-js")), "the link does bring in gRPC");
  const daemonStatic = await moduleGraph("ipam/daemon.ts", { dynamic: false });
  assert.ok(daemonStatic.some((s) => s.endsWith("/ipam/kubelet/enable.ts")));
  assert.deepEqual(daemonStatic.filter(isGrpc), [], "gRPC only through the dynamic import");
});
