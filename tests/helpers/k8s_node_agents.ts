/**
 * A node's agents inside the node (see k8s_nodens.ts): containerd (Debian's 1.6 with
 * runc) at the usual node paths, kubelet, and kube-proxy in nftables mode. Their config
 * files are written into the node's lane dir; each node's pod cgroups go under a cgroup root
 * named after the lane and the node, removed at teardown.
 *
 * @module
 */
import { cgroupHierarchies } from "./cgroup_mounts.ts";
import { containerdConfig } from "./containerd_config.ts";
import type { LaneBinaries } from "./k8s_bins.ts";
import type { NodeNamespace } from "./k8s_nodens.ts";
import type { Pki } from "./k8s_pki.ts";

/** containerd's socket inside the node. */
export const CONTAINERD_SOCKET = "/run/containerd/containerd.sock";

/** What the agents need to know about the node. */
export interface NodeAgentSpec {
  nodeName: string;
  nodeIp: string;
  /** cgroup root of every pod (`/<lane tag>`). */
  cgroupRoot: string;
  /** The image containerd runs as each pod's sandbox. */
  sandboxImage: string;
  /** The cluster DNS Service's ClusterIP, written into pods' resolv.conf (ClusterFirst). */
  clusterDns: string;
  pki: Pki;
  bins: LaneBinaries;
}

/** Starts containerd; resolves once its API answers. */
export async function startContainerd(node: NodeNamespace, s: NodeAgentSpec): Promise<void> {
  const conf = `${node.dir}/containerd.toml`;
  await Deno.writeTextFile(
    conf,
    containerdConfig({
      root: `${node.dir}/containerd-root`,
      state: "/run/containerd",
      grpcAddress: CONTAINERD_SOCKET,
      logLevel: "warn",
      sandboxImage: s.sandboxImage,
      runc: s.bins.runc,
      cniBinDir: "/opt/cni/bin",
      cniConfDir: "/etc/cni/net.d",
    }),
  );
  await node.start("containerd", [s.bins.containerd, "--config", conf]);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const r = await node.run([s.bins.ctr, "--address", CONTAINERD_SOCKET, "version"]);
    if (r.code === 0) return;
    if (!(await node.running("containerd"))) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error(
    `containerd did not answer; its log:\n${await tail(`${node.dir}/containerd.log`)}`,
  );
}

/** Imports an OCI archive into containerd's `k8s.io` namespace (where kubelet looks). */
export async function importImage(
  node: NodeNamespace,
  bins: LaneBinaries,
  archive: string,
): Promise<void> {
  const r = await node.run([
    bins.ctr,
    "--address",
    CONTAINERD_SOCKET,
    "-n",
    "k8s.io",
    "images",
    "import",
    archive,
  ]);
  if (r.code !== 0) throw new Error(`ctr -n k8s.io images import ${archive}: ${r.stderr}`);
}

/** Creates the pod cgroup root in every mounted hierarchy; returns the dirs made. */
export async function makeCgroupRoot(root: string): Promise<string[]> {
  const made: string[] = [];
  for (const h of await cgroupHierarchies()) {
    await Deno.mkdir(`${h}${root}`, { recursive: true });
    made.push(`${h}${root}`);
  }
  return made;
}

/**
 * PIDs of every process in the pod cgroup root: the containers, which live in mount
 * namespaces of their own and outlive their shims.
 */
export async function pidsInCgroupRoot(root: string): Promise<number[]> {
  const pids = new Set<number>();
  const walk = async (d: string) => {
    try {
      for await (const e of Deno.readDir(d)) {
        if (e.isDirectory) await walk(`${d}/${e.name}`);
        else if (e.name === "cgroup.procs") {
          const text = await Deno.readTextFile(`${d}/cgroup.procs`).catch(() => "");
          for (const l of text.split("\n")) if (l.trim()) pids.add(Number(l));
        }
      }
    } catch { /* gone */ }
  };
  for (const h of await cgroupHierarchies()) await walk(`${h}${root}`);
  return [...pids];
}

/** Removes the pod cgroup root (deepest first); returns what could not be removed. */
export async function removeCgroupRoot(root: string): Promise<string[]> {
  const left: string[] = [];
  for (const h of await cgroupHierarchies()) {
    const dirs: string[] = [];
    const walk = async (d: string) => {
      try {
        for await (const e of Deno.readDir(d)) if (e.isDirectory) await walk(`${d}/${e.name}`);
        dirs.push(d);
      } catch { /* gone */ }
    };
    await walk(`${h}${root}`);
    for (const d of dirs) {
      try {
        await Deno.remove(d);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) left.push(d);
      }
    }
  }
  return left;
}

/** Starts kubelet (after containerd and the API server). */
export async function startKubelet(node: NodeNamespace, s: NodeAgentSpec): Promise<void> {
  const conf = `${node.dir}/kubelet.yaml`;
  await Deno.writeTextFile(
    conf,
    JSON.stringify({
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: s.pki.caCert },
      },
      authorization: { mode: "Webhook" },
      containerRuntimeEndpoint: `unix://${CONTAINERD_SOCKET}`,
      cgroupDriver: "cgroupfs",
      cgroupRoot: s.cgroupRoot,
      // This machine has cgroup v1; kubelet 1.35+ refuses it unless told.
      failCgroupV1: false,
      failSwapOn: false,
      readOnlyPort: 0,
      healthzBindAddress: "127.0.0.1",
      clusterDomain: "cluster.local",
      clusterDNS: [s.clusterDns],
      resolvConf: "/etc/resolv.conf",
      volumePluginDir: `${node.dir}/volume-plugins`,
      serializeImagePulls: false,
      // The machine's disk is shared with other work: never evict the lane's pods for it.
      evictionHard: {
        "memory.available": "50Mi",
        "nodefs.available": "1%",
        "imagefs.available": "1%",
        "nodefs.inodesFree": "1%",
      },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
    }),
  );
  await node.start("kubelet", [
    s.bins.kubelet,
    `--config=${conf}`,
    `--kubeconfig=${s.pki.kubelet[s.nodeName]}`,
    `--hostname-override=${s.nodeName}`,
    `--node-ip=${s.nodeIp}`,
    "--v=1",
  ]);
}

/** Starts kube-proxy in nftables mode, touching no global sysctl. */
export async function startKubeProxy(node: NodeNamespace, s: NodeAgentSpec): Promise<void> {
  const conf = `${node.dir}/kube-proxy.yaml`;
  await Deno.writeTextFile(
    conf,
    JSON.stringify({
      apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
      kind: "KubeProxyConfiguration",
      clientConnection: { kubeconfig: s.pki.kubeconfig["kube-proxy"] },
      mode: "nftables",
      hostnameOverride: s.nodeName,
      healthzBindAddress: "127.0.0.1:10256",
      metricsBindAddress: "127.0.0.1:10249",
      // nf_conntrack_max is global: leave it and the timeouts as the machine has them.
      conntrack: {
        maxPerCore: 0,
        min: 0,
        tcpEstablishedTimeout: "0s",
        tcpCloseWaitTimeout: "0s",
        udpTimeout: "0s",
        udpStreamTimeout: "0s",
      },
    }),
  );
  await node.start("kube-proxy", [s.bins["kube-proxy"], `--config=${conf}`, "--v=1"]);
}

/** The last lines of a log file. */
export async function tail(path: string, lines = 30): Promise<string> {
  const text = await Deno.readTextFile(path).catch(() => "");
  return text.split("\n").slice(-lines).join("\n");
}
