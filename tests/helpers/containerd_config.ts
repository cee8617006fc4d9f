/**
 * The config file of a containerd 1.6 (Debian's) with its CRI plugin running pods through
 * runc and a CNI config dir: the one the runtime tests' private containerd and the
 * Kubernetes lane's node containerd share, apart from where things live.
 *
 * @module
 */

/** Where one containerd keeps its files and finds its programs. */
export interface ContainerdConfigSpec {
  /** containerd's root (images, snapshots). */
  root: string;
  /** containerd's state dir. */
  state: string;
  /** The gRPC socket. */
  grpcAddress: string;
  /** The ttrpc socket; containerd's default when absent. */
  ttrpcAddress?: string;
  /** containerd's log level. */
  logLevel: "warn" | "info";
  /** The image each pod's sandbox runs. */
  sandboxImage: string;
  /** The runc binary, and runc's state dir (runc's default when absent). */
  runc: string;
  runcRoot?: string;
  /** Where the CNI plugins and the CNI config are. */
  cniBinDir: string;
  cniConfDir: string;
  /**
   * A private containerd: the CRI stream server on loopback with a port of the kernel's
   * choosing, and pod netns mounted under the state dir rather than /run/netns.
   */
  private?: boolean;
}

/** Plugins that would need what this machine lacks (devmapper, btrfs, …) or send traces. */
const DISABLED_PLUGINS = [
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
];

/** Renders the TOML config (version 2) for `spec`. */
export function containerdConfig(spec: ContainerdConfigSpec): string {
  const cri = `plugins."io.containerd.grpc.v1.cri"`;
  const ttrpc = spec.ttrpcAddress === undefined
    ? ""
    : `[ttrpc]\n  address = "${spec.ttrpcAddress}"\n`;
  const privateCri = spec.private
    ? `  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`
    : "";
  const privateNetns = spec.private
    ? `  # Pod netns under the state dir rather than /run/netns.
  netns_mounts_under_state_dir = true
`
    : "";
  const runcRoot = spec.runcRoot === undefined ? "" : `        Root = "${spec.runcRoot}"\n`;
  return `version = 2
root = "${spec.root}"
state = "${spec.state}"
disabled_plugins = [${DISABLED_PLUGINS.map((p) => `"${p}"`).join(", ")}]

[grpc]
  address = "${spec.grpcAddress}"
${ttrpc}[debug]
  level = "${spec.logLevel}"
[metrics]
  address = ""

[${cri}]
  sandbox_image = "${spec.sandboxImage}"
${privateCri}  # This machine withholds CAP_SYS_RESOURCE, so runc may not lower oom_score_adj below
  # containerd's own (the sandbox asks for -998); clamp instead of failing.
  restrict_oom_score_adj = true
${privateNetns}  [${cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [${cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [${cri}.containerd.runtimes.runc.options]
        BinaryName = "${spec.runc}"
${runcRoot}        SystemdCgroup = false
  [${cri}.cni]
    bin_dir = "${spec.cniBinDir}"
    conf_dir = "${spec.cniConfDir}"
    max_conf_num = 1
`;
}
