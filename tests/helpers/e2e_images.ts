/**
 * The container images Kubernetes' sig-network conformance tests run, built here so that no
 * node ever pulls: one-layer OCI archives (tools/image/oci.ts, the writer of vpcni's own
 * image) named with the exact references of `test/utils/image/manifest.go` in
 * k8s.io/kubernetes v1.34.4, for `ctr -n k8s.io images import`. Every pod of those tests
 * has pull policy IfNotPresent (unset on a tagged image, or set so), so an image present
 * under its reference is used as it is.
 *
 * Most of them share a "tools" root file tree: a merged-/usr skeleton with dash as /bin/sh,
 * Debian's static busybox for the small applets, and the programs the tests exec in their
 * pods, each with the shared libraries `ldd` names: curl (`/dial` checks, `--interface`),
 * bash, getent (DNS), ip, ss, the OpenBSD `nc` (busybox's has no `-u`/`-v`) and `dig`/
 * `nslookup`. The last two come from the Debian packages `tools/dev setup` downloads and
 * unpacks into `.peers/e2e-debs/root`; the rest from this machine.
 *
 * Upstream content is reproduced where a test looks at it (agnhost's program, entrypoint,
 * users and TLS files); nginx, httpd and jessie-dnsutils are stand-ins that do what the
 * network tests ask of them. The archives are cached under `.peers/e2e-images/<key>`, the
 * key a digest of this file and of the agnhost and busybox binaries, so a change to either
 * rebuilds them.
 *
 * @module
 */
import { sha256Hex, writeOciArchive } from "../../tools/image/oci.ts";
import { K8S_BIN, K8S_VERSION } from "./k8s_bins.ts";

const PEERS = new URL("../../.peers", import.meta.url).pathname;

/** Where `tools/dev setup` unpacks netcat-openbsd, bind9-dnsutils and their libraries. */
export const E2E_DEBS_ROOT = `${PEERS}/e2e-debs/root`;

/** Where the built archives are kept between runs. */
export const E2E_IMAGES_CACHE = `${PEERS}/e2e-images`;

/** The agnhost binary `tools/dev setup` builds from the k8s.io/kubernetes module. */
export const AGNHOST_BIN = `${K8S_BIN}/agnhost`;

/** Where the module's tree is (agnhost's TLS files for its `porter` server). */
const K8S_SRC = `${PEERS}/k8s/${K8S_VERSION}/src`;

const E2E = "registry.k8s.io/e2e-test-images";

/** The exact references of test/utils/image/manifest.go (v1.34.4) the archives carry. */
export const E2E_IMAGE_REFS = {
  agnhost: `${E2E}/agnhost:2.56`,
  jessieDnsutils: `${E2E}/jessie-dnsutils:1.7`,
  nginx: `${E2E}/nginx:1.14-4`,
  busybox: `${E2E}/busybox:1.37.0-1`,
  httpd: `${E2E}/httpd:2.4.38-4`,
  pause: "registry.k8s.io/pause:3.10.1",
} as const;

/** One built archive. */
export interface E2eImage {
  ref: string;
  archive: string;
  bytes: number;
}

const PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// agnhost's Dockerfile adds this user and group; tests that run as "the image's user" look
// them up.
const PASSWD = [
  "root:x:0:0:root:/root:/bin/sh",
  "nobody:x:65534:65534:nobody:/nonexistent:/bin/false",
  "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh",
  "",
].join("\n");
const GROUP = [
  "root:x:0:",
  "nogroup:x:65534:",
  "user-defined-in-image:x:1000:",
  "group-defined-in-image:x:50000:user-defined-in-image",
  "",
].join("\n");

/** Host programs copied into the tools tree (source path → path in the image). */
const HOST_TOOLS: [string, string][] = [
  ["/usr/bin/dash", "/usr/bin/dash"],
  ["/usr/bin/bash", "/usr/bin/bash"],
  ["/usr/bin/curl", "/usr/bin/curl"],
  ["/usr/bin/getent", "/usr/bin/getent"],
  ["/usr/sbin/ip", "/usr/sbin/ip"],
  ["/usr/bin/ss", "/usr/bin/ss"],
];

/** Programs taken from the unpacked Debian packages (path under E2E_DEBS_ROOT → image). */
const DEB_TOOLS: [string, string][] = [
  ["/bin/nc.openbsd", "/usr/bin/nc"],
  ["/usr/bin/dig", "/usr/bin/dig"],
  ["/usr/bin/nslookup", "/usr/bin/nslookup"],
  ["/usr/bin/host", "/usr/bin/host"],
];

/** busybox applets that would shadow a real tool above (or be a second /bin/sh). */
const NOT_FROM_BUSYBOX = new Set(["busybox", "sh", "nc", "nslookup", "ip", "ss", "wget"]);

async function output(cmd: string, args: string[], env?: Record<string, string>) {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")} failed: ${dec.decode(out.stderr).trim()}`);
  }
  return dec.decode(out.stdout);
}

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

async function copyInto(root: string, from: string, to: string): Promise<void> {
  const dest = `${root}${to}`;
  await Deno.mkdir(dest.slice(0, dest.lastIndexOf("/")), { recursive: true });
  await Deno.copyFile(from, dest);
  await Deno.chmod(dest, (await Deno.stat(from)).mode! & 0o7777);
}

/**
 * Copies `from` to `to` in `root` with every shared library `ldd` names (those found in
 * the unpacked packages keep their path without the E2E_DEBS_ROOT prefix).
 */
async function addProgram(root: string, from: string, to: string): Promise<void> {
  await copyInto(root, from, to);
  const libDirs = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"]
    .map((d) => `${E2E_DEBS_ROOT}${d}`).join(":");
  const ldd = await output("ldd", [from], { LD_LIBRARY_PATH: libDirs });
  for (const line of ldd.split("\n")) {
    const m = line.match(/=>\s+(\/\S+)/) ?? line.match(/^\s+(\/\S+)\s+\(/);
    if (!m) continue;
    const lib = m[1];
    const inImage = lib.startsWith(E2E_DEBS_ROOT) ? lib.slice(E2E_DEBS_ROOT.length) : lib;
    if (!exists(`${root}${inImage}`)) await copyInto(root, lib, inImage);
  }
}

/** A merged-/usr skeleton, as Debian lays one out, with the users agnhost's image has. */
async function skeleton(root: string): Promise<void> {
  for (const d of ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc", "proc", "sys", "dev"]) {
    await Deno.mkdir(`${root}/${d}`, { recursive: true });
  }
  for (const d of ["root", "run", "var/run", "tmp"]) {
    await Deno.mkdir(`${root}/${d}`, { recursive: true });
  }
  await Deno.chmod(`${root}/tmp`, 0o1777);
  for (const d of ["bin", "sbin", "lib", "lib64"]) await Deno.symlink(`usr/${d}`, `${root}/${d}`);
  await Deno.writeTextFile(`${root}/etc/passwd`, PASSWD);
  await Deno.writeTextFile(`${root}/etc/group`, GROUP);
  await Deno.writeTextFile(
    `${root}/etc/nsswitch.conf`,
    "passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\n",
  );
}

/** Static busybox with each applet linked under /usr/bin, but those in `except`. */
async function addBusybox(root: string, busybox: string, except: Set<string>): Promise<void> {
  await copyInto(root, busybox, "/usr/bin/busybox");
  for (const a of (await output(busybox, ["--list"])).split("\n").filter((x) => x)) {
    if (except.has(a) || exists(`${root}/usr/bin/${a}`)) continue;
    await Deno.symlink("busybox", `${root}/usr/bin/${a}`);
  }
}

/** The tools tree the agnhost image and the stand-ins are made of. */
async function toolsTree(root: string, busybox: string): Promise<void> {
  await skeleton(root);
  for (const [from, to] of HOST_TOOLS) await addProgram(root, from, to);
  for (const [from, to] of DEB_TOOLS) await addProgram(root, `${E2E_DEBS_ROOT}${from}`, to);
  // dash is /bin/sh, as on Debian: busybox's ash would run its own applets (ip, for one)
  // in place of the real tools.
  await Deno.symlink("dash", `${root}/usr/bin/sh`);
  await addBusybox(root, busybox, NOT_FROM_BUSYBOX);
  if (exists("/etc/ssl/certs/ca-certificates.crt")) {
    await copyInto(
      root,
      "/etc/ssl/certs/ca-certificates.crt",
      "/etc/ssl/certs/ca-certificates.crt",
    );
  }
}

/** What is missing to build the images, each with the line that provides it. */
export function missingForImages(busybox: string): string[] {
  const need: [string, string][] = [
    [AGNHOST_BIN, "bash tools/dev setup (builds agnhost from k8s.io/kubernetes)"],
    [`${E2E_DEBS_ROOT}/usr/bin/dig`, "bash tools/dev setup (downloads bind9-dnsutils)"],
    [`${E2E_DEBS_ROOT}/bin/nc.openbsd`, "bash tools/dev setup (downloads netcat-openbsd)"],
    [`${K8S_SRC}/test/images/agnhost/porter/localhost.crt`, "bash tools/dev setup"],
    [busybox, "apt-get install busybox-static"],
    ...HOST_TOOLS.map((
      [p],
    ): [string, string] => [p, "apt-get install curl bash iproute2 libc-bin"]),
  ];
  return need.filter(([p]) => !exists(p)).map(([p, how]) => `  ${p}: ${how}`);
}

async function cacheKey(busybox: string): Promise<string> {
  const parts = await Promise.all([
    Deno.readFile(new URL(import.meta.url).pathname),
    Deno.readFile(AGNHOST_BIN),
    Deno.readFile(busybox),
  ]);
  const digests = await Promise.all(parts.map((p) => sha256Hex(p)));
  return (await sha256Hex(new TextEncoder().encode(digests.join("\n")))).slice(0, 16);
}

async function buildAll(out: string, busybox: string): Promise<void> {
  const work = await Deno.makeTempDir({ prefix: "vpcni-e2e-rootfs-" });
  const image = (file: string, ref: string, rootfs: string, config: Record<string, unknown>) =>
    writeOciArchive(`${out}/${file}`, {
      rootfs,
      name: ref,
      config: { Env: [PATH_ENV], WorkingDir: "/", ...config },
      createdBy: "vpcni tests/helpers/e2e_images.ts",
    });
  try {
    const tools = `${work}/tools`;
    await toolsTree(tools, busybox);
    await image("jessie-dnsutils.tar", E2E_IMAGE_REFS.jessieDnsutils, tools, {
      Cmd: ["sleep", "3600"],
    });

    // Stand-in: a web server on :80 serving one page.
    await Deno.mkdir(`${tools}/usr/local/apache2/htdocs`, { recursive: true });
    await Deno.writeTextFile(
      `${tools}/usr/local/apache2/htdocs/index.html`,
      "<html><body><h1>It works!</h1></body></html>\n",
    );
    await image("httpd.tar", E2E_IMAGE_REFS.httpd, tools, {
      Cmd: ["httpd", "-f", "-p", "80", "-h", "/usr/local/apache2/htdocs"],
    });
    await Deno.remove(`${tools}/usr/local`, { recursive: true });

    // agnhost:2.56 as its Dockerfile makes it: /agnhost (and /agnhost-2), porter's TLS
    // pair at /, an /uploads dir; entrypoint /agnhost, default subcommand pause.
    await copyInto(tools, AGNHOST_BIN, "/agnhost");
    await Deno.symlink("agnhost", `${tools}/agnhost-2`);
    for (const f of ["localhost.crt", "localhost.key"]) {
      await copyInto(tools, `${K8S_SRC}/test/images/agnhost/porter/${f}`, `/${f}`);
    }
    await Deno.mkdir(`${tools}/uploads`);
    await image("agnhost.tar", E2E_IMAGE_REFS.agnhost, tools, {
      Entrypoint: ["/agnhost"],
      Cmd: ["pause"],
    });
    // Stand-in: the EndpointSlice test only needs these pods Running with an address.
    await image("nginx.tar", E2E_IMAGE_REFS.nginx, tools, {
      Entrypoint: ["/agnhost", "test-webserver", "--port=80"],
    });
    const bb = `${work}/busybox`;
    await skeleton(bb);
    await addBusybox(bb, busybox, new Set(["busybox"]));
    await image("busybox.tar", E2E_IMAGE_REFS.busybox, bb, { Cmd: ["sh"] });

    // pause: sleeps until told to stop, and stops at once on SIGTERM (a shell that traps
    // it), so deleting a pod of it does not wait out the grace period.
    await image("pause.tar", E2E_IMAGE_REFS.pause, bb, {
      Entrypoint: ["/bin/sh", "-c", "trap 'exit 0' TERM INT; sleep 2147483647 & wait"],
    });
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

/**
 * The archives of every image the sig-network conformance tests use, built into the cache
 * when it does not hold this version of them. Throws listing what is missing to build them.
 */
export async function e2eImages(busybox: string): Promise<E2eImage[]> {
  const missing = missingForImages(busybox);
  if (missing.length > 0) {
    throw new Error(`the e2e test images need files that are missing:\n${missing.join("\n")}`);
  }
  const dir = `${E2E_IMAGES_CACHE}/${await cacheKey(busybox)}`;
  if (!exists(dir)) {
    await Deno.mkdir(E2E_IMAGES_CACHE, { recursive: true });
    const tmp = await Deno.makeTempDir({ dir: E2E_IMAGES_CACHE, prefix: ".building-" });
    try {
      await buildAll(tmp, busybox);
      // One rename: a reader sees all of them or none. Another run may have won the race.
      await Deno.rename(tmp, dir).catch(() => {});
    } finally {
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    }
  }
  const images: E2eImage[] = [];
  for (
    const [file, ref] of [
      ["agnhost.tar", E2E_IMAGE_REFS.agnhost],
      ["jessie-dnsutils.tar", E2E_IMAGE_REFS.jessieDnsutils],
      ["nginx.tar", E2E_IMAGE_REFS.nginx],
      ["httpd.tar", E2E_IMAGE_REFS.httpd],
      ["busybox.tar", E2E_IMAGE_REFS.busybox],
      ["pause.tar", E2E_IMAGE_REFS.pause],
    ]
  ) {
    const archive = `${dir}/${file}`;
    images.push({ ref, archive, bytes: (await Deno.stat(archive)).size });
  }
  return images;
}
