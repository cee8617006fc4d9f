/**
 * `deno task test:conformance`: Kubernetes' own sig-network conformance tests (the 45
 * `[sig-network] … [Conformance]` specs of k8s.io/kubernetes v1.34.4's `e2e.test`) and its
 * `Networking Granular Checks`, against the lane's cluster with vpcni as its CNI.
 *
 * vpcni is deployed as in the Kubernetes lane (tests/k8s/lane.k8s.ts): the image
 * `deno task image` builds and the example DaemonSet with the edits its header documents.
 * The images the tests run are built here (tests/helpers/e2e_images.ts) and imported into
 * the node's containerd under the references the suite uses, so nothing is pulled.
 *
 * Each run prints one summary line (passed / failed / skipped, wall time) and keeps its
 * JUnit report and log under `.lane/conformance/<run>/`; a run fails its test when any
 * selected spec failed. `CONFORMANCE_PROCS` sets the parallel ginkgo processes (default 4;
 * 1 runs `e2e.test` alone).
 *
 * Needs root and `bash tools/dev setup` (Kubernetes, e2e.test, agnhost, ginkgo, the Debian
 * packages of the test images).
 *
 * @module
 */
import assert from "node:assert/strict";
import { LaneCluster } from "../helpers/k8s_cluster.ts";
import { deployVpcni } from "../helpers/k8s_deploy.ts";
import { buildVpcniImage } from "../helpers/k8s_image.ts";
import { e2eImages } from "../helpers/e2e_images.ts";
import {
  type E2eBinaries,
  e2eBinaries,
  runSuite,
  type SuiteRun,
  summariseJunit,
  summaryLine,
} from "../helpers/e2e_suite.ts";

const TAG = `vcnf${Deno.pid % 100000}`;
const REPORTS = new URL("../../.lane/conformance", import.meta.url).pathname;
const PROCS = Number(Deno.env.get("CONFORMANCE_PROCS") ?? "4");
/** Worker nodes: two, so the granular checks spread their endpoints over both. */
const NODES = 2;

const laneStarted = performance.now();
let cluster: LaneCluster | undefined;
let bins: E2eBinaries | undefined;
let imageDir = "";

function need(): LaneCluster {
  if (!cluster) throw new Error("the cluster is not up (see the first test's failure)");
  return cluster;
}

const opts = { sanitizeOps: false, sanitizeResources: false };
const SIGNALS = ["SIGINT", "SIGTERM"] as const;

interface NodeJson {
  metadata: { name: string };
  status: { conditions: { type: string; status: string }[] };
}

Deno.test({
  name: "bring-up: the cluster with the e2e images, vpcni from the example DaemonSet on " +
    "every node, every node Ready",
  ...opts,
  async fn() {
    assert.equal(Deno.uid(), 0, "the conformance run needs root (namespaces, mounts, cgroups)");
    bins = e2eBinaries();
    imageDir = await Deno.makeTempDir({ prefix: `${TAG}-image-` });
    const busybox = ["/bin/busybox", "/usr/bin/busybox"].find((p) => {
      try {
        return Deno.statSync(p).isFile;
      } catch {
        return false;
      }
    }) ?? "/bin/busybox";
    const [image, testImages] = await Promise.all([
      buildVpcniImage(imageDir),
      e2eImages(busybox),
    ]);
    const mb = (n: number) => `${(n / 1e6).toFixed(0)} MB`;
    console.log(
      `conformance: test images ${testImages.map((i) => `${i.ref} (${mb(i.bytes)})`).join(", ")}`,
    );
    cluster = await LaneCluster.start({
      tag: TAG,
      images: [image.path, ...testImages.map((i) => i.archive)],
      nodes: NODES,
    });
    const c = cluster;
    console.log(`conformance: cluster up in ${(c.bringUpMs / 1000).toFixed(1)} s`);
    await deployVpcni(c, TAG);
    await c.waitFor(`${NODES} node(s) Ready`, 60_000, async () => {
      const nodes = await c.getJson<{ items: NodeJson[] }>(["nodes"]);
      return nodes.items.length === NODES &&
        nodes.items.every((n) =>
          n.status.conditions.some((x) => x.type === "Ready" && x.status === "True")
        );
    });
    console.log(
      `conformance: vpcni Ready on ${NODES} node(s) ` +
        `${((performance.now() - laneStarted) / 1000).toFixed(1)} s after the start`,
    );
  },
});

/** Runs the suite, prints its summary line, fails naming every spec that failed. */
async function suite(label: string, dir: string, run: Omit<SuiteRun, "reportDir" | "procs">) {
  const c = need();
  const r = await runSuite(c, bins!, { ...run, procs: PROCS, reportDir: `${REPORTS}/${dir}` });
  let xml = "";
  try {
    xml = await Deno.readTextFile(r.junit);
  } catch {
    throw new Error(`${label}: the suite exited ${r.code} and wrote no ${r.junit}; see ${r.log}`);
  }
  const s = summariseJunit(xml);
  console.log(summaryLine(label, s, r.wallMs) + ` (JUnit: ${r.junit})`);
  for (const f of s.failed) {
    console.log(`  FAILED ${f.name}\n    ${f.message.split("\n").slice(0, 6).join("\n    ")}`);
  }
  assert.deepEqual(s.failed.map((f) => f.name), [], `${label}: specs failed (log: ${r.log})`);
  assert.ok(s.passed.length > 0, `${label}: no spec ran (focus ${run.focus})`);
  assert.equal(r.code, 0, `${label}: the suite exited ${r.code} (log: ${r.log})`);
  return s;
}

Deno.test({
  name: "the 45 [sig-network] [Conformance] specs of Kubernetes' e2e suite pass",
  ...opts,
  async fn() {
    const s = await suite("sig-network conformance", "sig-network", {
      focus: "\\[sig-network\\].*\\[Conformance\\]",
    });
    assert.equal(s.passed.length, 45, "all 45 specs ran and passed");
  },
});

Deno.test({
  name: "the Networking Granular Checks (Pods and Services, SCTP and dual-stack left out) pass",
  ...opts,
  async fn() {
    const s = await suite("Networking Granular Checks", "granular", {
      focus: "Networking Granular Checks",
      // SCTP needs the sctp module; the dual-stack ones an IPv6 family vpcni does not have yet.
      skip: "SCTP|IPv6DualStack",
    });
    assert.deepEqual(s.skipped, [], "every focused spec ran (none skipped itself)");
  },
});

Deno.test({
  name: "teardown leaves nothing of the cluster behind",
  ...opts,
  async fn() {
    for (const sig of SIGNALS) Deno.removeSignalListener(sig, onSignal);
    if (imageDir) await Deno.remove(imageDir, { recursive: true });
    const c = need();
    cluster = undefined;
    assert.deepEqual(await c.close(), []);
    console.log(
      `conformance: total ${((performance.now() - laneStarted) / 1000).toFixed(1)} s`,
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
