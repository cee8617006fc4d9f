/**
 * The device plugin where the kubelet is absent or stuck, with the real daemon on the
 * simulator and the stand-in kubelet (tests/ipam/kubelet_standin.ts) over real gRPC:
 * - `devicePlugin: auto` with a device-plugin directory whose `kubelet.sock` nobody listens
 *   on (an earlier cluster's, or a kubelet not started yet) stays off, makes no socket, and
 *   serves a pod named in the request at once from its pool; a kubelet that comes later
 *   turns it on;
 * - a kubelet that takes the registration but whose pod-resources API never answers makes
 *   /readyz, STATUS and the doctor's check say that pods cannot start, and why; once it
 *   answers, all three say ready again.
 */
import assert from "node:assert/strict";
import {
  addReq,
  eventually,
  type Stack,
  standardScenario,
  startStack,
  SUBNETS,
} from "./harness.ts";
import { checkDevicePlugin, fetchDevicePluginView } from "../../doctor/checks_device_plugin.ts";
import { type KubeletStandin, podWith, startKubeletStandin } from "./kubelet_standin.ts";

const daemonUrl = (stack: Stack) => `http://127.0.0.1:${stack.daemon.introspectionAddr.port}`;

/** Two pools: `a` (the default) and `b`, each of its own subnets. */
const POOLS = [
  { name: "a", warmEnis: 0 },
  { name: "b", subnets: { ids: [SUBNETS.dmz] }, warmEnis: 0 },
];

async function readyz(stack: Stack): Promise<{ status: number; text: string }> {
  const r = await fetch(`${daemonUrl(stack)}/readyz`);
  return { status: r.status, text: await r.text() };
}

/**
 * A unix socket file with nobody listening on it, as a kubelet that was killed leaves it: a
 * child process listens on it and is killed (a listener closed in this process would remove
 * its file).
 */
async function staleSocket(path: string): Promise<void> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `Deno.listen({ transport: "unix", path: ${JSON.stringify(path)} });
      console.log("listening"); setInterval(() => {}, 1000);`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.getReader();
  const first = await reader.read();
  assert.match(new TextDecoder().decode(first.value), /listening/);
  child.kill("SIGKILL");
  await child.status;
  reader.releaseLock();
  await child.stdout.cancel();
  const st = await Deno.stat(path);
  assert.ok(st.isSocket, `${path} stays behind as a socket file`);
}

async function kubeletDir(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-kubelet-" });
  await Deno.mkdir(`${dir}/device-plugins`);
  await Deno.mkdir(`${dir}/pod-resources`);
  return dir;
}

Deno.test("device plugin auto: a kubelet.sock nobody listens on keeps it off; pods start at once", async () => {
  const kdir = await kubeletDir();
  const dp = `${kdir}/device-plugins`;
  const pr = `${kdir}/pod-resources/kubelet.sock`;
  await staleSocket(`${dp}/kubelet.sock`);
  await staleSocket(pr);
  const stack = await startStack(standardScenario(), {
    devicePlugin: "auto",
    devicePluginDir: dp,
    podResourcesSocket: pr,
    pools: POOLS,
  });
  let kubelet: KubeletStandin | undefined;
  try {
    // The ADD names its pod (as CNI_ARGS does): no kubelet, so no pod holds a device and
    // none is asked; the default pool, or the annotation's, serves it.
    const plain = await stack.call(addReq("p0"));
    assert.ok(plain.ok && "allocation" in plain, JSON.stringify(plain));
    assert.equal(plain.allocation.pool, "a");
    const annotated = await stack.call(addReq("p1", { "vpcni.io/pool": "b" }));
    assert.ok(annotated.ok && "allocation" in annotated, JSON.stringify(annotated));
    assert.equal(annotated.allocation.pool, "b");

    let last = { status: 0, text: "" };
    assert.ok(
      await eventually(async () => (last = await readyz(stack)).status === 200, 20_000),
      `/readyz: ${last.status} ${last.text}`,
    );
    const status = await stack.call({ version: 1, op: "status" });
    assert.ok(status.ok, JSON.stringify(status));

    const view = await stack.introspect<{ enabled: boolean; reason?: string }>(
      "/v1/device-plugin",
    );
    assert.equal(view.enabled, false, JSON.stringify(view));
    assert.match(view.reason ?? "", /no kubelet answers on .*device-plugins\/kubelet\.sock/);
    const doctor = checkDevicePlugin(await fetchDevicePluginView(daemonUrl(stack), 5000));
    assert.equal(doctor.status, "skip", JSON.stringify(doctor));
    assert.deepEqual(
      [...Deno.readDirSync(dp)].map((e) => e.name),
      ["kubelet.sock"],
      "no plugin socket is made for a kubelet that is not there",
    );

    // The kubelet starts later: auto turns on, registers both pools, and a pod holding a
    // device of b gets b without an annotation.
    const k = kubelet = await startKubeletStandin(dp, pr);
    assert.ok(
      await eventually(() => k.registrations.length === 2, 15_000),
      "registered once the kubelet answered",
    );
    assert.ok(
      await eventually(() => (k.devices("vpcni.io/b")?.length ?? 0) > 0, 15_000),
      "b's devices listed",
    );
    k.pods.push(podWith("default", "p2", "vpcni.io/b", [k.devices("vpcni.io/b")![0].id]));
    const held = await stack.call(addReq("p2"));
    assert.ok(held.ok && "allocation" in held, JSON.stringify(held));
    assert.equal(held.allocation.pool, "b", "the device picks the pool");
  } finally {
    await stack.close();
    await kubelet?.close();
    await Deno.remove(kdir, { recursive: true });
  }
});

Deno.test("device plugin: a kubelet whose pod-resources never answers makes readiness say so", async () => {
  const kdir = await kubeletDir();
  const dp = `${kdir}/device-plugins`;
  const pr = `${kdir}/pod-resources/kubelet.sock`;
  const kubelet = await startKubeletStandin(dp, pr);
  kubelet.podResourcesHangs = true;
  const stack = await startStack(standardScenario(), {
    devicePlugin: "auto",
    devicePluginDir: dp,
    podResourcesSocket: pr,
    pools: POOLS,
  });
  try {
    assert.ok(await eventually(() => kubelet.registrations.length === 2, 15_000), "registered");
    let last = { status: 0, text: "" };
    assert.ok(
      await eventually(async () => (last = await readyz(stack)).status === 503, 20_000),
      `/readyz while pod-resources is silent: ${last.status} ${last.text}`,
    );
    assert.match(last.text, /^not ready: the kubelet's pod-resources API at \S+ does not answer/);
    assert.ok(last.text.includes(pr), last.text);
    assert.match(last.text, /podResourcesSocket/, "the fix is named");

    const status = await stack.call({ version: 1, op: "status" });
    assert.ok(!status.ok && status.code === 50, JSON.stringify(status));
    assert.ok(status.msg.includes(pr), status.msg);

    const doctor = checkDevicePlugin(await fetchDevicePluginView(daemonUrl(stack), 5000));
    assert.equal(doctor.status, "fail", JSON.stringify(doctor));
    assert.match(doctor.found, /pods cannot start/);
    assert.match(doctor.fix ?? "", /podResourcesSocket/);

    // An ADD cannot tell which pool the pod's device is of: try again, nothing held.
    const add = await stack.call(addReq("p0"));
    assert.ok(!add.ok && add.code === 11, JSON.stringify(add));

    // The kubelet's API answers again: ready, and the pod starts.
    kubelet.podResourcesHangs = false;
    assert.ok(
      await eventually(async () => (last = await readyz(stack)).status === 200, 20_000),
      `/readyz once pod-resources answers: ${last.status} ${last.text}`,
    );
    const again = await stack.call({ version: 1, op: "status" });
    assert.ok(again.ok, JSON.stringify(again));
    const retried = await stack.call(addReq("p0"));
    assert.ok(retried.ok && "allocation" in retried, JSON.stringify(retried));
    assert.equal(retried.allocation.pool, "a");
  } finally {
    await stack.close();
    await kubelet.close();
    await Deno.remove(kdir, { recursive: true });
  }
});

Deno.test("device plugin: once the kubelet that took the registration is gone, pods no longer wait on it", async () => {
  const kdir = await kubeletDir();
  const dp = `${kdir}/device-plugins`;
  const pr = `${kdir}/pod-resources/kubelet.sock`;
  const kubelet = await startKubeletStandin(dp, pr);
  const stack = await startStack(standardScenario(), {
    devicePlugin: "on",
    devicePluginDir: dp,
    podResourcesSocket: pr,
    pools: POOLS,
  });
  try {
    assert.ok(await eventually(() => kubelet.registrations.length === 2, 15_000), "registered");
    // The kubelet is killed: both its sockets stay behind with nobody listening.
    await kubelet.close();
    await staleSocket(`${dp}/kubelet.sock`);
    await staleSocket(pr);
    const view = () =>
      stack.introspect<{ registered: boolean; lastError?: string }>(
        "/v1/device-plugin",
      );
    assert.ok(
      await eventually(async () => !(await view()).registered, 15_000),
      "the registration stops counting",
    );
    const add = await stack.call(addReq("p0"));
    assert.ok(add.ok && "allocation" in add, JSON.stringify(add));
    assert.equal(add.allocation.pool, "a");
    const ready = await readyz(stack);
    assert.equal(ready.status, 200, ready.text);
    let last = {};
    assert.ok(
      await eventually(async () => {
        const v = await view();
        last = v;
        return /no kubelet answers on .*kubelet\.sock/.test(v.lastError ?? "");
      }, 15_000),
      `the doctor is told why: ${JSON.stringify(last)}`,
    );
  } finally {
    await stack.close();
    await Deno.remove(kdir, { recursive: true });
  }
});
