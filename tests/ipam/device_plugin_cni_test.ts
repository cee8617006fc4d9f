/**
 * A pod that asks for `vpcni.io/public: 1` gets an address from pool `public` without any
 * annotation, all the way through real parts: a standalone kubelet admits the pod and hands
 * it a device of the daemon's plugin, containerd runs vpcni's CNI plugin for its sandbox,
 * and the daemon asks the kubelet's pod-resources API which pool the pod holds. A pod whose
 * annotation names another pool than its resource gets no sandbox, with code 7's message in
 * the kubelet's log. The node is the simulated one of the runtime tests
 * (tests/helpers/runtime_node.ts); skipped where the kubelet is not built.
 */
import assert from "node:assert/strict";
import { nodeCheckpoint, startRuntimeNode } from "../helpers/runtime_node.ts";
import { Containerd } from "../helpers/runtime_containerd.ts";
import { KUBELET_VERSION, kubeletBin, StandaloneKubelet } from "../helpers/kubelet_standalone.ts";
import { eventually } from "./harness.ts";

const TAG = `kdc${Deno.pid % 100000}`;
const built = kubeletBin() !== undefined;
if (!built) {
  console.warn(`kubelet ${KUBELET_VERSION} not built here: device_plugin_cni_test skipped`);
}

interface Allocation {
  podName?: string;
  pool: string;
  ip: string;
}

Deno.test({
  name: "device plugin through kubelet, containerd and the CNI plugin: the resource picks the pool",
  ignore: !built,
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  const kdir = await Deno.makeTempDir({ prefix: `${TAG}-kubelet-` });
  // The node's daemon starts before the kubelet (whose directory does not exist yet), with
  // the device plugin `auto` at the kubelet's paths: it turns on once the kubelet answers.
  Deno.env.set("VPCNI_LOG_LEVEL", "debug");
  const node = await startRuntimeNode(TAG, {
    kubelet: {
      devicePluginDir: `${kdir}/var-lib/kubelet/device-plugins`,
      podResourcesSocket: `${kdir}/root/pod-resources/kubelet.sock`,
    },
  }).finally(() => Deno.env.delete("VPCNI_LOG_LEVEL"));
  let containerd: Containerd | undefined;
  let kubelet: StandaloneKubelet | undefined;
  const problems: string[] = [];
  try {
    containerd = await Containerd.start({
      nodePath: node.nodePath,
      cniBinDir: node.binDir,
      cniConfDir: node.confDir,
      tag: TAG,
    });
    kubelet = await StandaloneKubelet.startOn({
      dir: kdir,
      netnsPath: node.nodePath,
      nodeIp: node.nodeIp,
      containerd,
    });
    const k = kubelet;
    assert.ok(
      await eventually(async () => (await k.allocatable()).has("vpcni.io/public"), 15_000),
      `the daemon registered vpcni.io/public: ${await k.logTail(10)}`,
    );
    // The daemon's introspection, from inside the node netns where it listens on loopback.
    const daemonView = async () => {
      const out = await new Deno.Command("nsenter", {
        args: [
          `--net=${node.nodePath}`,
          Deno.execPath(),
          "eval",
          'console.log(await (await fetch("http://127.0.0.1:61679/v1/device-plugin")).text())',
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      return new TextDecoder().decode(out.success ? out.stdout : out.stderr);
    };
    // The daemon's checkpoint names each pod's allocation (rewritten on every change).
    const inNode = async () => (await nodeCheckpoint(node)).allocations as Allocation[];

    await k.addStaticPod("web", { "vpcni.io/public": 1 }, {}, true);
    await k.addStaticPod("mixed", { "vpcni.io/public": 1 }, { "vpcni.io/pool": "internal" }, true);
    let web: Allocation | undefined;
    assert.ok(
      await eventually(async () => {
        web = (await inNode()).find((a) => a.podName === "web-vpcni-node");
        return web !== undefined;
      }, 60_000),
      `web got no address: ${await k.logTail(15)}`,
    );
    assert.equal(
      web!.pool,
      "public",
      `no annotation: the device named the pool\n${await daemonView()}`,
    );
    assert.equal(node.whereIs(web!.ip)?.zone, "public", "the VPC agrees: a public subnet");

    // As the kubelet logs it: the plugin's message inside the runtime's error, quotes escaped.
    const refusal = 'picks pool \\"internal\\", but the pod requests resource vpcni.io/public';
    assert.ok(
      await eventually(async () => (await Deno.readTextFile(k.log)).includes(refusal), 60_000),
      `the kubelet did not report code 7 for the mixed pod: ${await k.logTail(15)}`,
    );
    assert.equal(
      (await inNode()).find((a) => a.podName === "mixed-vpcni-node"),
      undefined,
      "the mixed pod holds no address",
    );

    // The pod goes: the runtime's DEL gives the address back.
    await k.removeStaticPod("web");
    await k.removeStaticPod("mixed");
    assert.ok(
      await eventually(
        async () => !(await inNode()).some((a) => a.podName === "web-vpcni-node"),
        60_000,
      ),
      "web's address was released",
    );
  } finally {
    await kubelet?.stopProcess();
    if (containerd) problems.push(...await containerd.close());
    await node.close();
    await Deno.remove(kdir, { recursive: true }).catch(() => {});
  }
  assert.deepEqual(problems, []);
});
