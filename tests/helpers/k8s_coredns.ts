/**
 * The lane's cluster DNS: CoreDNS (`tools/dev setup` builds it from the Go module proxy into
 * .peers/bin) in a one-layer image built here, deployed as the `kube-dns` Service at
 * {@linkcode KUBE_DNS_IP} with a Deployment behind it, as a cluster's DNS add-on is. It
 * serves `cluster.local` from the API (the kubernetes plugin, with the RBAC it needs to
 * watch Services, EndpointSlices, Pods and Namespaces) and nothing else: the lane has no
 * upstream resolver, so there is no forward (and no loop detection for one).
 *
 * @module
 */
import { type OciArchive, writeOciArchive } from "../../tools/image/oci.ts";
import { KUBE_DNS_IP } from "./k8s_control_plane.ts";

/** The CoreDNS image's name (never pulled: imported into every node). */
export const COREDNS_IMAGE = "docker.io/vpcni/coredns:k8s-lane";

/** The label CoreDNS's pods and the kube-dns Service select on. */
export const KUBE_DNS_LABEL = "k8s-app=kube-dns";

/** Writes the CoreDNS image (the static binary, a passwd) to `path`. */
export async function buildCorednsImage(path: string, coredns: string): Promise<OciArchive> {
  const work = await Deno.makeTempDir({ prefix: "vpcni-coredns-" });
  try {
    const rootfs = `${work}/rootfs`;
    for (const d of ["etc", "proc", "sys", "dev", "tmp"]) {
      await Deno.mkdir(`${rootfs}/${d}`, { recursive: true });
    }
    await Deno.copyFile(coredns, `${rootfs}/coredns`);
    await Deno.chmod(`${rootfs}/coredns`, 0o755);
    await Deno.writeTextFile(`${rootfs}/etc/passwd`, "root:x:0:0:root:/:/coredns\n");
    await Deno.writeTextFile(`${rootfs}/etc/group`, "root:x:0:\n");
    return await writeOciArchive(path, {
      rootfs,
      name: COREDNS_IMAGE,
      config: {
        Entrypoint: ["/coredns"],
        Cmd: ["-conf", "/etc/coredns/Corefile"],
        WorkingDir: "/",
      },
      createdBy: "vpcni tests/helpers/k8s_coredns.ts",
    });
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

/** The Corefile: cluster.local (and reverse lookups of pods and Services) from the API. */
const COREFILE = `.:53 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    loadbalance
}
`;

/** The objects of the DNS add-on, for one `kubectl apply`. */
export function corednsObjects(): Record<string, unknown>[] {
  const ns = "kube-system";
  const labels = { "k8s-app": "kube-dns" };
  return [
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "coredns", namespace: ns } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "system:coredns" },
      rules: [
        {
          apiGroups: [""],
          resources: ["endpoints", "services", "pods", "namespaces"],
          verbs: ["list", "watch"],
        },
        {
          apiGroups: ["discovery.k8s.io"],
          resources: ["endpointslices"],
          verbs: ["list", "watch"],
        },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "system:coredns" },
      roleRef: {
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: "system:coredns",
      },
      subjects: [{ kind: "ServiceAccount", name: "coredns", namespace: ns }],
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "coredns", namespace: ns },
      data: { Corefile: COREFILE },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "coredns", namespace: ns, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: "coredns",
            priorityClassName: "system-cluster-critical",
            // CoreDNS is the cluster's resolver: it must not ask itself.
            dnsPolicy: "Default",
            terminationGracePeriodSeconds: 1,
            containers: [{
              name: "coredns",
              image: COREDNS_IMAGE,
              imagePullPolicy: "Never",
              args: ["-conf", "/etc/coredns/Corefile"],
              ports: [
                { name: "dns", containerPort: 53, protocol: "UDP" },
                { name: "dns-tcp", containerPort: 53, protocol: "TCP" },
              ],
              volumeMounts: [{ name: "config", mountPath: "/etc/coredns", readOnly: true }],
              livenessProbe: { httpGet: { path: "/health", port: 8080 }, periodSeconds: 10 },
              readinessProbe: { httpGet: { path: "/ready", port: 8181 }, periodSeconds: 2 },
            }],
            volumes: [{ name: "config", configMap: { name: "coredns" } }],
          },
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "kube-dns", namespace: ns, labels },
      spec: {
        clusterIP: KUBE_DNS_IP,
        selector: labels,
        ports: [
          { name: "dns", port: 53, protocol: "UDP", targetPort: 53 },
          { name: "dns-tcp", port: 53, protocol: "TCP", targetPort: 53 },
        ],
      },
    },
  ];
}
