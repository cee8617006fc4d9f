/**
 * The documentation of every configuration knob: its default as the README shows it, the
 * environment variable and flag that set it (where there are any) and one line on what it
 * does. It feeds the README's table, `vpcni serve --list-knobs`, the flags' help, and the
 * names configuration errors give to knobs set by a flag.
 *
 * @module
 */
import { DEFAULT_IPAM_SOCKET } from "../proto/ipam.ts";
import { DEFAULT_DEVICE_PLUGIN_DIR, DEFAULT_POD_RESOURCES_SOCKET } from "./kubelet/defaults.ts";

/** One documented knob. */
export interface KnobDoc {
  /** The knob's path in the configuration file; `pools[].` prefixes a pool's knobs. */
  knob: string;
  /** The default as shown to users; a parenthesised text where it is not a literal value. */
  def: string;
  /** The environment variable that sets it, if any. */
  env?: string;
  /** The `vpcni serve` flag that sets it, if any. */
  flag?: string;
  /** What the knob does, in one line. */
  doc: string;
}

/** Documentation of each knob, in the order the README lists them. */
export const KNOBS: KnobDoc[] = [
  {
    knob: "clusterName",
    def: "vpcni",
    env: "VPCNI_CLUSTER_NAME",
    flag: "--cluster-name",
    doc: "tagged on every ENI the daemon creates; the leak collector only touches ENIs with it",
  },
  {
    knob: "datapath",
    def: "ipvlan-l2",
    env: "VPCNI_DATAPATH",
    flag: "--datapath",
    doc: "ipvlan-l2 | ipvlan-l3s | veth; reported in introspection",
  },
  {
    knob: "socketPath",
    def: DEFAULT_IPAM_SOCKET,
    env: "VPCNI_SOCKET",
    flag: "--socket",
    doc:
      "unix socket the CNI plugin talks to (mode 0600 from its creation); anything but a stale socket at the path is refused, never replaced",
  },
  {
    knob: "stateDir",
    def: "/var/lib/vpcni",
    env: "VPCNI_STATE_DIR",
    flag: "--state-dir",
    doc:
      "where the checkpoint and the lock live; must be a directory (created 0700 if absent), one daemon per directory",
  },
  {
    knob: "listen",
    def: "127.0.0.1:61679",
    env: "VPCNI_LISTEN",
    flag: "--listen",
    doc: "introspection and /metrics address; loopback only",
  },
  {
    knob: "region",
    def: "(from IMDS)",
    env: "AWS_REGION",
    flag: "--region",
    doc: "EC2 region",
  },
  {
    knob: "ec2Endpoint",
    def: "(SDK default)",
    env: "VPCNI_EC2_ENDPOINT",
    flag: "--ec2-endpoint",
    doc: "EC2 API endpoint override (the simulator, a VPC endpoint)",
  },
  {
    knob: "imdsEndpoint",
    def: "http://169.254.169.254",
    env: "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    flag: "--imds-endpoint",
    doc: "IMDSv2 endpoint",
  },
  {
    knob: "logLevel",
    def: "info",
    env: "VPCNI_LOG_LEVEL",
    flag: "--log-level",
    doc: "debug | info | warning | error; logs are JSON lines on stderr",
  },
  {
    knob: "addTimeoutSeconds",
    def: "20",
    doc: "how long an ADD waits for the pool to grow before answering code 11; > 0, at most " +
      "300. Less when the plugin waits less for the answer (its `daemonTimeoutMs`; unset, " +
      "120 s for ADD): the daemon answers within the plugin's bound",
  },
  {
    knob: "reconcileIntervalSeconds",
    def: "5",
    doc: "period of the warm loop (targets, cooldown expiry, releases); 0.05–300",
  },
  {
    knob: "releaseDelaySeconds",
    def: "60",
    doc: "hysteresis: a surplus must last this long before IPs or ENIs are released; 0–86400",
  },
  {
    knob: "leakedEniGraceSeconds",
    def: "300",
    doc: "our tagged ENIs 'available' for longer than this are deleted; 0–604800 (a week)",
  },
  {
    knob: "imdsCheckSeconds",
    def: "60",
    doc:
      "period of the comparison with instance metadata (no EC2 API calls); a disagreement starts an EC2 re-sync at once; > 0, at most 3600",
  },
  {
    knob: "ec2ResyncSeconds",
    def: "600",
    doc:
      "period of the full re-sync with EC2 (adopt or drop addresses EC2 disagrees on, refresh subnet free counts) and of the leaked-ENI collector; > 0, at most 86400",
  },
  {
    knob: "startJitterSeconds",
    def: "120",
    doc:
      "the first EC2 re-sync and leak pass after a start come up to this much later, at random (nodes started together spread); 0–3600",
  },
  {
    knob: "routeTableBase",
    def: "100",
    doc:
      "route table of ENI with device index d (0–63) is routeTableBase + d; 1–189 or 256–2147483584, so no ENI lands on table 0, 253 (default), 254 (main) or 255 (local)",
  },
  { knob: "defaultPool", def: "(first pool)", doc: "pool used by pods without annotation" },
  {
    knob: "devicePlugin",
    def: "auto",
    env: "VPCNI_DEVICE_PLUGIN",
    doc:
      "auto | on | off: advertise each pool's room to the kubelet as `vpcni.io/<pool>` (auto: once a kubelet answers on devicePluginDir/kubelet.sock)",
  },
  {
    knob: "devicePluginDir",
    def: "(kubelet's)",
    env: "VPCNI_DEVICE_PLUGIN_DIR",
    doc:
      `the kubelet's device-plugin directory, ${DEFAULT_DEVICE_PLUGIN_DIR} (its kubelet.sock, our vpcni-<pool>.sock)`,
  },
  {
    knob: "podResourcesSocket",
    def: "(kubelet's)",
    env: "VPCNI_POD_RESOURCES_SOCKET",
    doc: `the kubelet's pod-resources socket, ${DEFAULT_POD_RESOURCES_SOCKET}`,
  },
  {
    knob: "nodeNetns",
    def: "(the daemon's own)",
    env: "VPCNI_NODE_NETNS",
    doc:
      "netns (a path) the daemon wires pods from; set only when the daemon runs outside the node's netns (development nodes, tests)",
  },
  {
    knob: "cniWorkerIdleSeconds",
    def: "0",
    doc:
      "0: one thread that wires pods runs always (more stop after 60 s idle); N: each stops after N s idle (saves ≈ 3 MiB; next ADD +70 ms)",
  },
  { knob: "pools[].name", def: "default", doc: "DNS label; annotation vpcni.io/pool names it" },
  {
    knob: "pools[].subnets",
    def: "node",
    doc: '`node` (the primary ENI\'s subnet), `{ids: [subnet-…]}` or `{tags: "k=v,k2 in (a,b)"}`',
  },
  {
    knob: "pools[].securityGroups",
    def: "primary",
    doc: '`primary` (the primary ENI\'s groups), `{ids: [sg-…]}` or `{tags: "selector"}`',
  },
  { knob: "pools[].minimumIps", def: "0", doc: "total addresses (used + free) always held" },
  { knob: "pools[].warmIps", def: "0", doc: "free addresses kept ready" },
  {
    knob: "pools[].warmEnis",
    def: "1",
    doc: "free addresses kept ready, in whole ENIs' worth (AWS VPC CNI's WARM_ENI_TARGET)",
  },
  {
    knob: "pools[].prefixDelegation",
    def: "false",
    doc: "assign /28 prefixes instead of single addresses",
  },
  { knob: "pools[].maxEnis", def: "(instance limit)", doc: "most ENIs this pool may hold" },
  {
    knob: "pools[].firstInterfaceIndex",
    def: "0",
    doc: "ENIs with a lower device index are never used by this pool",
  },
  {
    knob: "pools[].allowSharedSubnets",
    def: "true",
    doc: "several ENIs of the node may sit in one subnet",
  },
  {
    knob: "pools[].ipCooldownSeconds",
    def: "30",
    doc:
      "a released address is not handed out again before this (survives restarts); 0–3600; a checkpoint cooldown ending later than now + 3600 s is cut to that, with a warning",
  },
  {
    knob: "pools[].snat",
    def: "node",
    doc:
      "`node` (`none` on ipvlan-l2): pods reach beyond the VPC with the node's address (SNAT); `none`: with their own",
  },
  {
    knob: "pools[].snatExcludeCidrs",
    def: "[]",
    doc: "destinations outside the VPC reached without SNAT (peered networks, VPN, on-premises)",
  },
  {
    knob: "pools[].snatRandomFully",
    def: "true",
    doc: "SNAT picks every connection's source port at random (no port clashes under load)",
  },
];
