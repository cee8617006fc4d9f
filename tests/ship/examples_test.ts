/**
 * The files in examples/ are what users copy: each conflist must parse with the plugin's
 * own config parser (as the runtime hands it over), the DaemonSet must install, run the
 * daemon on the host network and probe the daemon's real health endpoints, its embedded
 * daemon config must pass the daemon's validation, and the bootstrap script must be valid
 * shell that uses real vpcni flags.
 *
 * @module
 */
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { parseConfig } from "../../cni/config.ts";
import { resolveConfig } from "../../ipam/config.ts";
import { parseConflist } from "../../cli/conflist.ts";
import { run } from "../helpers/sh.ts";
import { editedExample } from "../helpers/k8s_workloads.ts";
import { PEERS_BIN } from "../helpers/peers.ts";

const examples = new URL("../../examples/", import.meta.url).pathname;
const repo = new URL("../..", import.meta.url).pathname;

function conflists(): string[] {
  return [...Deno.readDirSync(`${examples}conflists`)].map((e) => e.name)
    .filter((n) => n.endsWith(".conflist")).sort();
}

Deno.test("every example conflist parses with the plugin's config parser", () => {
  const names = conflists();
  assert.deepEqual(names, [
    "10-vpcni.conflist",
    "20-vpcni-ipvlan.conflist",
    "30-vpcni-chained.conflist",
  ]);
  const roles: string[] = [];
  for (const n of names) {
    const list = JSON.parse(Deno.readTextFileSync(`${examples}conflists/${n}`));
    parseConflist(list, n); // structure, and that vpcni is used
    for (const p of list.plugins) {
      if (p.type !== "vpcni" && p.ipam?.type !== "vpcni") continue;
      const cfg = parseConfig({ ...p, cniVersion: list.cniVersion, name: list.name });
      roles.push(`${n}:${cfg.role}`);
    }
  }
  assert.deepEqual(roles, [
    "10-vpcni.conflist:main",
    "20-vpcni-ipvlan.conflist:ipam",
    "30-vpcni-chained.conflist:main",
  ]);
  const ipvlan = JSON.parse(Deno.readTextFileSync(`${examples}conflists/20-vpcni-ipvlan.conflist`));
  assert.equal(ipvlan.plugins[0].type, "ipvlan", "vpcni as IPAM under the reference ipvlan plugin");
  const chained = JSON.parse(
    Deno.readTextFileSync(`${examples}conflists/30-vpcni-chained.conflist`),
  );
  assert.deepEqual(chained.plugins.map((p: { type: string }) => p.type), [
    "vpcni",
    "portmap",
    "bandwidth",
  ]);
});

Deno.test("a conflist with a typo is refused by the same parser the examples pass", () => {
  const list = JSON.parse(Deno.readTextFileSync(`${examples}conflists/10-vpcni.conflist`));
  list.plugins[0].datpath = "veth";
  assert.throws(() => parseConflist(list, "typo.conflist"), /unsupported field datpath/);
});

Deno.test("the DaemonSet installs with an init container, runs hostNetwork, probes /healthz and /readyz", () => {
  const docs = parseAllDocuments(
    Deno.readTextFileSync(`${examples}kubernetes/vpcni-daemonset.yaml`),
  )
    .map((d) => d.toJS());
  const kinds = docs.map((d) => d.kind);
  assert.deepEqual(kinds, ["ServiceAccount", "ConfigMap", "DaemonSet"]);
  assert.ok(!kinds.some((k) => /Role/.test(k)), "no RBAC: vpcni never calls the Kubernetes API");

  const cm = docs[1];
  const daemonCfg = resolveConfig(
    parseAllDocuments(cm.data["config.yaml"])[0].toJS(),
    {},
    {},
    "ConfigMap vpcni-config",
  );
  assert.deepEqual(daemonCfg.pools.map((p) => p.name), ["public", "internal"]);

  const spec = docs[2].spec.template.spec;
  assert.equal(spec.hostNetwork, true);
  const init = spec.initContainers[0];
  assert.deepEqual(init.command.slice(1, 2), ["install"]);
  const daemon = spec.containers[0];
  assert.deepEqual(daemon.command.slice(1, 2), ["serve"]);
  const port = Number(daemonCfg.listen.split(":")[1]);
  assert.deepEqual(daemon.livenessProbe.httpGet, { host: "127.0.0.1", port, path: "/healthz" });
  assert.deepEqual(daemon.readinessProbe.httpGet, { host: "127.0.0.1", port, path: "/readyz" });

  // The init container's flags are real `vpcni install` flags: a dry run with them succeeds.
  const mounts = Object.fromEntries(
    init.volumeMounts.map((m: { name: string; mountPath: string }) => [m.name, m.mountPath]),
  );
  assert.ok(init.command.includes(`--bin-dir=${mounts["cni-bin"]}`));
  assert.ok(
    init.command.some((a: string) => a.startsWith(`--conflist-file=${mounts["cni-conf"]}/`)),
  );
});

Deno.test("the DaemonSet's install flags and the bootstrap's commands are accepted by vpcni", async () => {
  const docs = parseAllDocuments(
    Deno.readTextFileSync(`${examples}kubernetes/vpcni-daemonset.yaml`),
  )
    .map((d) => d.toJS());
  const root = await Deno.makeTempDir({ prefix: "vdr-examples-" });
  try {
    await Deno.writeTextFile(`${root}/config.yaml`, docs[1].data["config.yaml"]);
    const flags = (docs[2].spec.template.spec.initContainers[0].command as string[]).slice(2)
      .map((a) =>
        a.replace("/etc/vpcni/config.yaml", `${root}/config.yaml`).replace(
          "=/host/",
          `=${root}/host/`,
        )
      );
    // The node carries the reference plugins the DaemonSet chains (install checks for them).
    await Deno.mkdir(`${root}/host/opt/cni/bin`, { recursive: true });
    for (const p of ["portmap", "bandwidth"]) {
      await Deno.copyFile(`${PEERS_BIN}/${p}`, `${root}/host/opt/cni/bin/${p}`);
    }
    const r = await run([
      "deno",
      "run",
      "-A",
      "--quiet",
      `${repo}main.ts`,
      "install",
      ...flags,
      "--dry-run",
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /conflist .*10-vpcni\.conflist: would write/);
    assert.match(r.stdout, /"datapath": "ipvlan-l2"/);

    const script = `${examples}bootstrap/node-bootstrap.sh`;
    const syntax = await run(["sh", "-n", script]);
    assert.equal(syntax.code, 0, syntax.stderr);
    const text = await Deno.readTextFile(script);
    const maxpods = /"\$VPCNI" doctor maxpods (.*)\)/.exec(text);
    assert.ok(maxpods, "the bootstrap computes max pods with vpcni doctor maxpods");
    const args = maxpods[1].replace('"$TYPE"', "m5.xlarge").split(" ");
    const mp = await run([
      "deno",
      "run",
      "-A",
      "--quiet",
      `${repo}main.ts`,
      "doctor",
      "maxpods",
      ...args,
    ]);
    assert.equal(mp.code, 0, mp.stderr);
    assert.equal(mp.stdout, "44\n", "m5.xlarge without the primary ENI: 3 × 14 + 2");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

/** `<n>Mi` / `<n>Gi` in MiB. */
function mebibytes(q: string): number {
  const m = /^(\d+)(Mi|Gi)$/.exec(q);
  assert.ok(m, `memory quantity ${q} in Mi or Gi`);
  return Number(m[1]) * (m[2] === "Gi" ? 1024 : 1);
}

Deno.test("the DaemonSet runs on linux/amd64 nodes only, with memory sized from bench's RSS figures", () => {
  const docs = parseAllDocuments(
    Deno.readTextFileSync(`${examples}kubernetes/vpcni-daemonset.yaml`),
  ).map((d) => d.toJS());
  const spec = docs[2].spec.template.spec;
  const terms = spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    .nodeSelectorTerms;
  assert.deepEqual(terms, [{
    matchExpressions: [
      { key: "kubernetes.io/os", operator: "In", values: ["linux"] },
      { key: "kubernetes.io/arch", operator: "In", values: ["amd64"] },
    ],
  }]);
  // The daemon's measured RSS, before and after an hour of churn, per V8 flag set.
  const results = Deno.readTextFileSync(`${repo}bench/RESULTS.md`);
  const rss = [...results.matchAll(/\| ([\d.]+) MiB +\| ([\d.]+) MiB +\|\s*$/gm)]
    .flatMap((m) => [Number(m[1]), Number(m[2])]);
  assert.ok(rss.length >= 4, "bench/RESULTS.md has the daemon's RSS table");
  const peak = Math.max(...rss);
  const { requests, limits } = spec.containers[0].resources;
  assert.ok(mebibytes(requests.memory) >= peak, `request ${requests.memory} ≥ peak ${peak} MiB`);
  assert.ok(
    mebibytes(limits.memory) >= 1.5 * peak,
    `limit ${limits.memory} leaves headroom over the ${peak} MiB peak`,
  );
  for (const c of [...spec.initContainers, ...spec.containers]) {
    assert.equal(c.image, docs[2].spec.template.spec.containers[0].image, "one image for both");
  }
  // Off EC2, AWS keys come from a Secret that need not exist on EC2.
  assert.deepEqual(spec.containers[0].envFrom, [
    { secretRef: { name: "vpcni-aws-credentials", optional: true } },
  ]);
  // The kubelet's sockets for pool capacity (device plugins) and each pod's pool.
  const hostPaths = Object.fromEntries(
    spec.volumes.filter((v: { hostPath?: unknown }) => v.hostPath).map((
      v: { name: string; hostPath: { path: string } },
    ) => [v.name, v.hostPath.path]),
  );
  assert.equal(hostPaths["device-plugins"], "/var/lib/kubelet/device-plugins");
  assert.equal(hostPaths["pod-resources"], "/var/lib/kubelet/pod-resources");
});

Deno.test("the sed in the DaemonSet's header points the daemon at other endpoints, and nothing else changes", async () => {
  const path = `${examples}kubernetes/vpcni-daemonset.yaml`;
  const text = Deno.readTextFileSync(path);
  const header = text.split("\n").filter((l) => l.startsWith("#")).join("\n");
  const exprs = [...header.matchAll(/-e '([^']+)'/g)].map((m) => m[1]);
  assert.equal(exprs.length, 3, "two endpoint edits and the datapath edit");
  const r = await run(["sed", ...exprs.flatMap((e) => ["-e", e]), path]);
  assert.equal(r.code, 0, r.stderr);
  const edited = parseAllDocuments(r.stdout).map((d) => d.toJS());
  const cfg = resolveConfig(
    parseAllDocuments(edited[1].data["config.yaml"])[0].toJS(),
    {},
    {},
    "edited ConfigMap",
  );
  assert.equal(cfg.ec2Endpoint, "http://127.0.0.1:8800");
  assert.equal(cfg.imdsEndpoint, "http://127.0.0.1:8801");
  assert.equal(cfg.datapath, "veth");
  // Unedited, the daemon uses AWS's own endpoints.
  const original = parseAllDocuments(text).map((d) => d.toJS());
  const plain = resolveConfig(
    parseAllDocuments(original[1].data["config.yaml"])[0].toJS(),
    {},
    {},
    "ConfigMap",
  );
  assert.equal(plain.ec2Endpoint, undefined);
  assert.equal(plain.imdsEndpoint, undefined);
  assert.deepEqual(edited[2], original[2], "the DaemonSet itself is unchanged");
  // The lane applies the same edits (tests/helpers/k8s_workloads.ts).
  assert.equal(
    editedExample(text, {
      ec2Endpoint: "http://127.0.0.1:8800",
      imdsEndpoint: "http://127.0.0.1:8801",
      datapath: "veth",
    }),
    r.stdout,
  );
});
