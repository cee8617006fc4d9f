/**
 * The lane's certificates, made fresh at every start with openssl (P-256 keys, valid two
 * days): the cluster CA and the API server's serving certificate, a client certificate and
 * kubeconfig per component (each node's kubelet as `system:node:<node>`, the controller
 * manager, the scheduler, kube-proxy, an admin in `system:masters`), the service-account
 * signing key, and
 * a separate front-proxy CA with its client, without which the scheduler and the controller
 * manager log authentication errors in a loop.
 *
 * @module
 */

/** Paths of everything {@linkcode makePki} wrote. */
export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  apiserverCert: string;
  apiserverKey: string;
  apiserverKubeletCert: string;
  apiserverKubeletKey: string;
  frontProxyCaCert: string;
  frontProxyClientCert: string;
  frontProxyClientKey: string;
  saKey: string;
  saPub: string;
  /**
   * Kubeconfig per client: admin, controller-manager, scheduler (naming the control plane's
   * local URL) and kube-proxy (naming the URL every node reaches).
   */
  kubeconfig: Record<KubeClient, string>;
  /** Each node's kubelet kubeconfig, by node name (naming the URL every node reaches). */
  kubelet: Record<string, string>;
}

/** The clients that get a kubeconfig, besides the kubelets. */
export type KubeClient = "admin" | "controller-manager" | "scheduler" | "kube-proxy";

/** Who each client is: certificate subject. */
const SUBJECTS: Record<KubeClient, string> = {
  admin: "/O=system:masters/CN=lane-admin",
  "controller-manager": "/CN=system:kube-controller-manager",
  scheduler: "/CN=system:kube-scheduler",
  "kube-proxy": "/CN=system:kube-proxy",
};

/** Clients whose kubeconfig names the node-facing URL (they run on every node). */
const ON_EVERY_NODE: KubeClient[] = ["kube-proxy"];

/** One shell function call that makes a key and a certificate signed by a CA. */
function issue(
  name: string,
  subject: string,
  ca: string,
  ext: string,
): string {
  return `issue ${name} '${subject}' ${ca} '${ext}'`;
}

/**
 * Writes the CA, certificates and kubeconfigs into `dir`. `server` is the API server URL the
 * control plane's own clients name, `nodeServer` the one the nodes' agents name; `sans` the
 * API server certificate's alternative names.
 */
export async function makePki(
  openssl: string,
  dir: string,
  o: { nodeNames: string[]; server: string; nodeServer: string; sans: string[] },
): Promise<Pki> {
  await Deno.mkdir(dir, { recursive: true });
  const clientExt = "keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth";
  const serverExt = "keyUsage=critical,digitalSignature,keyEncipherment\n" +
    `extendedKeyUsage=serverAuth\nsubjectAltName=${o.sans.join(",")}`;
  const kubelets = Object.fromEntries(
    o.nodeNames.map((n) => [`kubelet-${n}`, `/O=system:nodes/CN=system:node:${n}`]),
  );
  const clients: Record<string, string> = { ...SUBJECTS, ...kubelets };
  const script = [
    "set -eu",
    `cd '${dir}'`,
    `ossl() { '${openssl}' "$@" 2>/dev/null; }`,
    "ca() {",
    "  ossl ecparam -name prime256v1 -genkey -noout -out $1.key",
    '  ossl req -x509 -new -key $1.key -subj "/CN=$2" -days 2 -out $1.crt \\',
    "    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign",
    "}",
    "issue() {",
    "  ossl ecparam -name prime256v1 -genkey -noout -out $1.key",
    '  ossl req -new -key $1.key -subj "$2" -out $1.csr',
    "  printf '%b\\n' \"$4\" > $1.ext",
    "  ossl x509 -req -in $1.csr -CA $3.crt -CAkey $3.key -CAcreateserial -days 2 \\",
    "    -extfile $1.ext -out $1.crt",
    "  rm -f $1.csr $1.ext",
    "}",
    "ca ca lane-ca",
    "ca front-proxy-ca lane-front-proxy-ca",
    issue("apiserver", "/CN=kube-apiserver", "ca", serverExt.replaceAll("\n", "\\n")),
    issue(
      "apiserver-kubelet-client",
      "/O=system:masters/CN=kube-apiserver-kubelet-client",
      "ca",
      clientExt.replaceAll("\n", "\\n"),
    ),
    issue(
      "front-proxy-client",
      "/CN=front-proxy-client",
      "front-proxy-ca",
      clientExt.replaceAll("\n", "\\n"),
    ),
    ...Object.entries(clients).map(([name, subj]) =>
      issue(name, subj, "ca", clientExt.replaceAll("\n", "\\n"))
    ),
    "ossl ecparam -name prime256v1 -genkey -noout -out sa.key",
    "ossl ec -in sa.key -pubout -out sa.pub",
  ].join("\n");
  const out = await new Deno.Command("sh", {
    args: ["-c", script],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(
      `making the lane's certificates failed: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
  const write = async (name: string, server: string) => {
    const path = `${dir}/${name}.kubeconfig`;
    await Deno.writeTextFile(path, kubeconfigText(server, `${dir}/ca.crt`, dir, name));
    return path;
  };
  const kubeconfig = {} as Record<KubeClient, string>;
  for (const name of Object.keys(SUBJECTS) as KubeClient[]) {
    kubeconfig[name] = await write(name, ON_EVERY_NODE.includes(name) ? o.nodeServer : o.server);
  }
  const kubelet: Record<string, string> = {};
  for (const n of o.nodeNames) kubelet[n] = await write(`kubelet-${n}`, o.nodeServer);
  return {
    dir,
    caCert: `${dir}/ca.crt`,
    caKey: `${dir}/ca.key`,
    apiserverCert: `${dir}/apiserver.crt`,
    apiserverKey: `${dir}/apiserver.key`,
    apiserverKubeletCert: `${dir}/apiserver-kubelet-client.crt`,
    apiserverKubeletKey: `${dir}/apiserver-kubelet-client.key`,
    frontProxyCaCert: `${dir}/front-proxy-ca.crt`,
    frontProxyClientCert: `${dir}/front-proxy-client.crt`,
    frontProxyClientKey: `${dir}/front-proxy-client.key`,
    saKey: `${dir}/sa.key`,
    saPub: `${dir}/sa.pub`,
    kubeconfig,
    kubelet,
  };
}

function kubeconfigText(server: string, ca: string, dir: string, user: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `- name: lane`,
    `  cluster: { server: "${server}", certificate-authority: "${ca}" }`,
    "users:",
    `- name: ${user}`,
    `  user: { client-certificate: "${dir}/${user}.crt", client-key: "${dir}/${user}.key" }`,
    "contexts:",
    `- name: lane`,
    `  context: { cluster: lane, user: ${user} }`,
    "current-context: lane",
    "",
  ].join("\n");
}
