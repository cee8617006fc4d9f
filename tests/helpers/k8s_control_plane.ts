/**
 * The lane's control plane, all inside the first node (see k8s_nodens.ts) on its loopback
 * and address: etcd (Debian's 3.4, data on the node's tmpfs /run), kube-apiserver,
 * kube-controller-manager and kube-scheduler, each with the certificates of k8s_pki.ts.
 * Nothing listens on the machine's own network namespace.
 *
 * @module
 */
import type { LaneBinaries } from "./k8s_bins.ts";
import type { NodeNamespace } from "./k8s_nodens.ts";
import type { Pki } from "./k8s_pki.ts";

/** The API server's port on the node. */
export const APISERVER_PORT = 6443;

/** The Service CIDR (the example DaemonSet's `--service-cidr`). */
export const SERVICE_CIDR = "10.100.0.0/16";

/** The `kubernetes` Service's ClusterIP (first address of the Service CIDR). */
export const KUBERNETES_SERVICE_IP = "10.100.0.1";

/** The cluster DNS Service's (`kube-dns`) ClusterIP: the Service CIDR's .10, by convention. */
export const KUBE_DNS_IP = "10.100.0.10";

/** What the control plane needs to know about the node it runs on. */
export interface ControlPlaneSpec {
  nodeIp: string;
  pki: Pki;
  bins: LaneBinaries;
}

/** Starts etcd and waits for it to answer on 127.0.0.1:2379. */
export async function startEtcd(node: NodeNamespace, bins: LaneBinaries): Promise<void> {
  await node.start("etcd", [
    bins.etcd,
    "--name=lane",
    "--data-dir=/run/etcd",
    "--listen-client-urls=http://127.0.0.1:2379",
    "--advertise-client-urls=http://127.0.0.1:2379",
    "--listen-peer-urls=http://127.0.0.1:2380",
    "--initial-advertise-peer-urls=http://127.0.0.1:2380",
    "--initial-cluster=lane=http://127.0.0.1:2380",
    "--logger=zap",
    "--log-level=warn",
  ]);
}

/** Starts kube-apiserver (after etcd). */
export async function startApiserver(node: NodeNamespace, s: ControlPlaneSpec): Promise<void> {
  const p = s.pki;
  await node.start("kube-apiserver", [
    s.bins["kube-apiserver"],
    "--etcd-servers=http://127.0.0.1:2379",
    "--bind-address=0.0.0.0",
    `--secure-port=${APISERVER_PORT}`,
    `--advertise-address=${s.nodeIp}`,
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${p.saPub}`,
    `--service-account-signing-key-file=${p.saKey}`,
    `--tls-cert-file=${p.apiserverCert}`,
    `--tls-private-key-file=${p.apiserverKey}`,
    `--client-ca-file=${p.caCert}`,
    `--kubelet-client-certificate=${p.apiserverKubeletCert}`,
    `--kubelet-client-key=${p.apiserverKubeletKey}`,
    // The node's name resolves nowhere: reach kubelet (exec, logs) at its address.
    "--kubelet-preferred-address-types=InternalIP",
    `--requestheader-client-ca-file=${p.frontProxyCaCert}`,
    "--requestheader-allowed-names=front-proxy-client",
    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    "--requestheader-group-headers=X-Remote-Group",
    "--requestheader-username-headers=X-Remote-User",
    `--proxy-client-cert-file=${p.frontProxyClientCert}`,
    `--proxy-client-key-file=${p.frontProxyClientKey}`,
    "--authorization-mode=Node,RBAC",
    "--enable-admission-plugins=NodeRestriction",
    "--allow-privileged=true",
    "--profiling=false",
    "--v=1",
  ]);
}

/** Starts kube-controller-manager and kube-scheduler (after the API server is ready). */
export async function startControllers(node: NodeNamespace, s: ControlPlaneSpec): Promise<void> {
  const p = s.pki;
  const common = (kubeconfig: string) => [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    `--client-ca-file=${p.caCert}`,
    `--requestheader-client-ca-file=${p.frontProxyCaCert}`,
    "--bind-address=127.0.0.1",
    "--leader-elect=false",
    "--profiling=false",
    "--v=1",
  ];
  await node.start("kube-controller-manager", [
    s.bins["kube-controller-manager"],
    ...common(p.kubeconfig["controller-manager"]),
    `--cluster-signing-cert-file=${p.caCert}`,
    `--cluster-signing-key-file=${p.caKey}`,
    `--root-ca-file=${p.caCert}`,
    `--service-account-private-key-file=${p.saKey}`,
    "--use-service-account-credentials=true",
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    "--allocate-node-cidrs=false",
  ]);
  await node.start("kube-scheduler", [
    s.bins["kube-scheduler"],
    ...common(p.kubeconfig.scheduler),
  ]);
}
