/**
 * The programs the one-node Kubernetes lane runs, and where each comes from: the Kubernetes
 * binaries `tools/dev setup` builds from the Go module proxy into `.peers/k8s/<version>/bin`,
 * Debian's etcd, containerd, runc, openssl and nft, util-linux's `unshare`/`nsenter`, and the
 * reference CNI plugins every node carries (`loopback` for the pod's lo; `portmap` and
 * `bandwidth` for the example's chain), and CoreDNS for the cluster's DNS.
 *
 * @module
 */
import { PEERS_BIN } from "./peers.ts";

/** The Kubernetes release the lane runs (tools/dev's K8S_VERSION). */
export const K8S_VERSION = "v1.34.4";

/** Where tools/dev puts the Kubernetes binaries. */
export const K8S_BIN = new URL(`../../.peers/k8s/${K8S_VERSION}/bin`, import.meta.url).pathname;

const K8S_COMMANDS = [
  "kubelet",
  "kube-apiserver",
  "kube-scheduler",
  "kube-controller-manager",
  "kube-proxy",
  "kubectl",
];

const DEBIAN: { bin: string; pkg: string }[] = [
  { bin: "etcd", pkg: "etcd-server" },
  { bin: "containerd", pkg: "containerd" },
  { bin: "ctr", pkg: "containerd" },
  { bin: "containerd-shim-runc-v2", pkg: "containerd" },
  { bin: "runc", pkg: "runc" },
  { bin: "openssl", pkg: "openssl" },
  { bin: "nft", pkg: "nftables" },
  { bin: "unshare", pkg: "util-linux" },
  { bin: "nsenter", pkg: "util-linux" },
  { bin: "mount", pkg: "mount" },
  { bin: "busybox", pkg: "busybox-static" },
];

/** CNI plugins a node has besides vpcni (from .peers/bin). */
export const NODE_CNI_PLUGINS = ["loopback", "portmap", "bandwidth"];

/** Other Go peers the lane runs from .peers/bin: the cluster's DNS server. */
const LANE_PEERS = ["coredns"];

const SYSTEM_DIRS = ["/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin"];

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** Absolute paths of every program the lane runs, by name. */
export type LaneBinaries = Record<string, string>;

/**
 * Finds every program the lane needs; throws one error that lists each missing one with
 * the line that installs it.
 */
export function laneBinaries(): LaneBinaries {
  const found: LaneBinaries = {};
  const missing: string[] = [];
  for (const b of K8S_COMMANDS) {
    const p = `${K8S_BIN}/${b}`;
    if (isFile(p)) found[b] = p;
    else {missing.push(
        `  ${b}: bash tools/dev setup (builds Kubernetes ${K8S_VERSION} into ${K8S_BIN})`,
      );}
  }
  for (const d of DEBIAN) {
    const p = SYSTEM_DIRS.map((dir) => `${dir}/${d.bin}`).find(isFile);
    if (p) found[d.bin] = p;
    else missing.push(`  ${d.bin}: apt-get install ${d.pkg}`);
  }
  for (const b of [...NODE_CNI_PLUGINS, ...LANE_PEERS]) {
    const p = `${PEERS_BIN}/${b}`;
    if (isFile(p)) found[b] = p;
    else missing.push(`  ${b}: bash tools/dev setup (Go test peers into .peers/bin)`);
  }
  if (missing.length > 0) {
    throw new Error(
      `the Kubernetes lane needs programs that are missing:\n${missing.join("\n")}`,
    );
  }
  return found;
}
