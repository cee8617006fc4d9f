/**
 * What the lane deploys: the example DaemonSet with the edits its header documents (the
 * simulator's endpoints, and the veth datapath on a kernel without ipvlan), and the test
 * workloads: busybox Deployments serving HTTP with `nc` (busybox's wget segfaults on this
 * machine kind, so nothing here uses it) and probed by kubelet over HTTP.
 *
 * @module
 */

/** The example manifest users copy. */
export const EXAMPLE_DAEMONSET = new URL(
  "../../examples/kubernetes/vpcni-daemonset.yaml",
  import.meta.url,
).pathname;

/** The port every test workload serves HTTP on. */
export const WEB_PORT = 8080;

/**
 * The example with the endpoint lines set and, when `datapath` is given, the datapath
 * replaced: exactly the `sed` the example's header documents. Throws when a line to edit is
 * missing, so a changed example cannot silently run against AWS's own endpoints.
 */
export function editedExample(
  text: string,
  o: { ec2Endpoint: string; imdsEndpoint: string; datapath?: string },
): string {
  const edits: [RegExp, string][] = [
    [/^ {4}# ec2Endpoint: .*/m, `    ec2Endpoint: ${o.ec2Endpoint}`],
    [/^ {4}# imdsEndpoint: .*/m, `    imdsEndpoint: ${o.imdsEndpoint}`],
  ];
  if (o.datapath) edits.push([/^ {4}datapath: .*/m, `    datapath: ${o.datapath}`]);
  let out = text;
  for (const [re, to] of edits) {
    if (!re.test(out)) throw new Error(`the example has no line matching ${re}`);
    out = out.replace(re, to);
  }
  return out;
}

/** The shell of the web server: answers every request with the pod's name. */
const SERVER = [
  "cat > /tmp/http <<'EOF'",
  "#!/bin/sh",
  "cr=$(printf '\\r')",
  'while read -r l; do [ "${l%$cr}" = "" ] && break; done',
  "printf 'HTTP/1.0 200 OK\\r\\nContent-Type: text/plain\\r\\n\\r\\n%s\\n' \"$(hostname)\"",
  "EOF",
  "chmod +x /tmp/http",
  `exec /bin/busybox nc -ll -p ${WEB_PORT} -e /tmp/http`,
].join("\n");

/** A Deployment of busybox web servers; `pool` becomes the vpcni.io/pool annotation. */
export function webDeployment(o: {
  name: string;
  replicas: number;
  image: string;
  pool?: string;
  /** Extended resources each pod requests (and is limited to). */
  resources?: Record<string, string>;
  /** Spread the replicas evenly over the nodes (hard constraint, skew 1). */
  spread?: boolean;
  /** Run only on this node (a kubernetes.io/hostname node selector). */
  node?: string;
}): Record<string, unknown> {
  const annotations: Record<string, string> = o.pool ? { "vpcni.io/pool": o.pool } : {};
  const container: Record<string, unknown> = {
    name: "web",
    image: o.image,
    imagePullPolicy: "Never",
    command: ["/bin/sh", "-c", SERVER],
    ports: [{ containerPort: WEB_PORT }],
    readinessProbe: {
      httpGet: { path: "/ready", port: WEB_PORT },
      periodSeconds: 2,
      timeoutSeconds: 2,
    },
  };
  if (o.resources) container.resources = { requests: o.resources, limits: o.resources };
  const placement: Record<string, unknown> = {};
  if (o.node) placement.nodeSelector = { "kubernetes.io/hostname": o.node };
  if (o.spread) {
    placement.topologySpreadConstraints = [{
      maxSkew: 1,
      topologyKey: "kubernetes.io/hostname",
      whenUnsatisfiable: "DoNotSchedule",
      labelSelector: { matchLabels: { app: o.name } },
    }];
  }
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: o.name, namespace: "default" },
    spec: {
      replicas: o.replicas,
      selector: { matchLabels: { app: o.name } },
      template: {
        metadata: { labels: { app: o.name }, annotations },
        spec: {
          terminationGracePeriodSeconds: 1,
          enableServiceLinks: false,
          // The web pods never resolve a name: they do not depend on the cluster's DNS.
          dnsPolicy: "Default",
          ...placement,
          containers: [container],
        },
      },
    },
  };
}

/** A bare Pod with the template of {@linkcode webDeployment} (labelled `app: <group>`). */
export function webPod(o: {
  name: string;
  group: string;
  image: string;
  pool?: string;
  resources?: Record<string, string>;
  node?: string;
}): Record<string, unknown> {
  const d = webDeployment({ ...o, name: o.group, replicas: 1 }) as {
    spec: { template: { metadata: Record<string, unknown>; spec: Record<string, unknown> } };
  };
  const t = d.spec.template;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { ...t.metadata, name: o.name, namespace: "default" },
    spec: t.spec,
  };
}

/**
 * A Pod that only sleeps, to run commands in with kubectl exec, on node `node`: with the
 * node's network (`hostNetwork`), or a pod network of its own resolving names with the
 * cluster's DNS (a Pod's default dnsPolicy, ClusterFirst).
 */
export function clientPod(
  o: { name: string; image: string; node: string; hostNetwork?: boolean },
): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: o.name, namespace: "default", labels: { app: "client" } },
    spec: {
      nodeSelector: { "kubernetes.io/hostname": o.node },
      terminationGracePeriodSeconds: 1,
      enableServiceLinks: false,
      ...(o.hostNetwork ? { hostNetwork: true, dnsPolicy: "ClusterFirstWithHostNet" } : {}),
      containers: [{
        name: "client",
        image: o.image,
        imagePullPolicy: "Never",
        command: ["/bin/sleep", "2147483647"],
      }],
    },
  };
}

/** A ClusterIP Service in front of a Deployment from {@linkcode webDeployment}. */
export function webService(name: string): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "default" },
    spec: {
      type: "ClusterIP",
      selector: { app: name },
      ports: [{ port: 80, targetPort: WEB_PORT }],
    },
  };
}

/** Shell that fetches `http://ip:port/` with busybox nc; prints the response body. */
export function httpGetScript(ip: string, port: number): string {
  return `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | /bin/busybox nc -w 3 ${ip} ${port}`;
}
