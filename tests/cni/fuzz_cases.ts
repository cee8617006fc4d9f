/**
 * The request generator of the CNI fuzz test (fuzz_test.ts). Each case starts from a valid
 * request — a verb, a role, a network configuration and the CNI_* variables — and applies
 * one or two mutations that make it invalid by construction, plus up to two that keep it
 * valid (fields the plugin ignores or accepts), so every case must end in the spec's error
 * and change nothing. Every mutation lists the codes it may cause; a case may answer any
 * code of its mutations. Seeded (mulberry32): the same seed and index give the same case.
 *
 * @module
 */

/** The verbs the fuzz drives. */
export type Verb = "ADD" | "DEL" | "CHECK" | "GC" | "STATUS";

/** What the generated requests point at: the live pod, the daemon, files on disk. */
export interface FuzzWorld {
  network: string;
  socket: string;
  deadSocket: string;
  cniPath: string;
  livePod: { containerId: string; ifName: string; netns: string; ip: string };
  /** Another pod netns nothing is attached to. */
  otherNetns: string;
  nodeNetns: string;
  files: { fifo: string; regular: string; dir: string; socket: string; log: string };
}

/** One generated request. */
export interface FuzzCase {
  index: number;
  verb: Verb;
  role: "main" | "ipam";
  /** Names of the mutations applied, for the failure message. */
  mutations: string[];
  /** The complete environment; an absent key is an unset variable. */
  env: Record<string, string>;
  stdin: string;
  /** Codes the plugin may answer with. */
  codes: number[];
  /** Mutation kinds whose checks live elsewhere (see AWAITING_ATTACHMENT_FIXES). */
  awaiting: string[];
}

/**
 * Mutation kinds whose refusal comes with the attachment fixes made alongside (a second
 * ADD of a live attachment, a GC without cni.dev/valid-attachments, a pod MTU below the
 * node's links, addresses no pod may have). Generated always; their cases are only checked
 * when the kind is listed here as enabled, i.e. once those fixes are merged.
 */
export const AWAITING_ATTACHMENT_FIXES: readonly string[] = [
  "second ADD of the live attachment",
  "GC without cni.dev/valid-attachments",
  "mtu below the node's links",
  "ipam.type loopback",
];

/**
 * Kinds of {@linkcode AWAITING_ATTACHMENT_FIXES} that are checked: none until those fixes
 * are in. VPCNI_FUZZ_ENABLE (a comma-separated list of kinds) adds some for a trial run.
 */
export const ENABLED_AWAITING: readonly string[] = [
  ...(Deno.env.get("VPCNI_FUZZ_ENABLE")?.split(",").filter((k) => k !== "") ?? []),
];

/** A seeded PRNG (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Conf = Record<string, unknown>;

/** The request being built. */
interface Draft {
  verb: Verb;
  role: "main" | "ipam";
  env: Record<string, string | undefined>;
  conf: Conf;
  /** Replaces the JSON of `conf` when set (stdin that is not a config at all). */
  rawStdin?: string;
  /** True when the container id must not be the live pod's (see `fresh`). */
  fresh: boolean;
}

interface Mutation {
  name: string;
  /** Verbs (and roles) on which the mutation makes the request invalid. */
  verbs: Verb[];
  roles?: ("main" | "ipam")[];
  codes: number[];
  /**
   * The request gets a container id nothing holds: the mutation is invalid only where
   * the live pod is not involved (e.g. an unreachable daemon: a DEL of the live pod would
   * rightly tear it down before failing to release).
   */
  fresh?: boolean;
  apply(d: Draft, w: FuzzWorld, pick: <T>(xs: readonly T[]) => T): void;
}

const ALL: Verb[] = ["ADD", "DEL", "CHECK", "GC", "STATUS"];
const POD: Verb[] = ["ADD", "DEL", "CHECK"];

function setEnv(name: string, values: readonly (string | undefined)[]) {
  return (d: Draft, _w: FuzzWorld, pick: <T>(xs: readonly T[]) => T) => {
    d.env[name] = pick(values);
  };
}

function setField(path: string[], values: readonly unknown[]) {
  return (d: Draft, _w: FuzzWorld, pick: <T>(xs: readonly T[]) => T) => {
    let o = d.conf as Record<string, unknown>;
    for (const k of path.slice(0, -1)) {
      if (typeof o[k] !== "object" || o[k] === null) o[k] = {};
      o = o[k] as Record<string, unknown>;
    }
    const v = pick(values);
    if (v === undefined) delete o[path[path.length - 1]];
    else o[path[path.length - 1]] = v;
  };
}

const long = (n: number, c = "a") => c.repeat(n);
const ips = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ address: `10.9.${(i >> 8) & 255}.${i & 255}/32` }));

/** The invalid mutations. In the IPAM role the `ipam` section is the plugin's own config. */
function invalidMutations(w: FuzzWorld): Mutation[] {
  const f = w.files;
  return [
    {
      name: "CNI_COMMAND",
      verbs: ALL,
      codes: [4],
      apply: setEnv("CNI_COMMAND", [undefined, "", "add", "ATTACH", "ADD ", "DEL\0", long(300)]),
    },
    {
      name: "CNI_CONTAINERID",
      verbs: POD,
      codes: [4],
      apply: setEnv("CNI_CONTAINERID", [
        undefined,
        "-x",
        "a b",
        "a/b",
        "../../etc",
        "é",
        long(257),
        "x\ny",
        "x\0y",
        ".hidden",
      ]),
    },
    {
      name: "CNI_IFNAME",
      verbs: POD,
      codes: [4],
      apply: setEnv("CNI_IFNAME", [
        undefined,
        "lo",
        "all",
        "default",
        ".",
        "..",
        "eth%d",
        "%s",
        "a/b",
        "eth0:1",
        "e th0",
        "\t",
        "eth\0",
        long(16),
        "ethé",
        "bonding_masters",
        "eth0\n",
        "\u200beth0",
      ]),
    },
    {
      name: "CNI_NETNS that is not a pod's netns",
      verbs: POD,
      codes: [4],
      apply: setEnv("CNI_NETNS", [
        w.nodeNetns,
        "/proc/self/ns/net",
        "/proc/thread-self/ns/net",
        "/proc/1/ns/net",
        f.fifo,
        f.regular,
        "/dev/null",
        f.dir,
        f.socket,
        "/proc/self/ns/mnt",
        "/proc/self/ns/uts",
        "/proc/self/ns/user",
        "run/netns/x",
        `/${long(5000, "n")}`,
      ]),
    },
    {
      name: "CNI_NETNS unset or missing",
      verbs: ["ADD", "CHECK"],
      codes: [3, 4],
      apply: setEnv("CNI_NETNS", [undefined, "/run/netns/vpcni-fuzz-gone", `${f.regular}/x`]),
    },
    {
      name: "CNI_ARGS",
      verbs: ALL,
      codes: [4],
      apply: setEnv("CNI_ARGS", [
        "K8S_POD_NAME",
        "=x",
        "FOO=bar",
        "IgnoreUnknown=maybe;FOO=1",
        `K8S_POD_NAME=${long(20_000)}`,
        Array(65).fill("IgnoreUnknown=1").join(";"),
        `K8S_POD_NAME=${long(2000)}`,
        "K8S_POD_NAME=a\x1b[2J",
      ]),
    },
    {
      name: "CNI_PATH",
      verbs: ALL,
      codes: [4],
      apply: setEnv("CNI_PATH", [
        Array(65).fill("/opt/cni/bin").join(":"),
        `/${long(70_000, "p")}`,
        "/opt/cni/bin\0",
      ]),
    },
    { name: "CNI_PATH unset", verbs: ["GC"], codes: [4], apply: setEnv("CNI_PATH", [undefined]) },
    {
      name: "stdin that is not a config",
      verbs: ALL,
      codes: [6, 7],
      apply: (d, _w, pick) => {
        d.rawStdin = pick(["", "{", "[]", "null", '"x"', "1", "{}}", "\u0000", " ".repeat(10)]);
      },
    },
    {
      name: "stdin over 1 MiB",
      verbs: ALL,
      codes: [7],
      apply: (d) => {
        d.conf.padding = long(1024 * 1024);
      },
    },
    {
      name: "cniVersion",
      verbs: ALL,
      codes: [1, 7],
      apply: setField(["cniVersion"], [undefined, "", "0.2.0", "2.0.0", "1.1", 1.1, null, []]),
    },
    {
      name: "cniVersion too old for the verb",
      verbs: ["CHECK", "GC", "STATUS"],
      codes: [1],
      apply: (d, _w, pick) => {
        d.conf.cniVersion = d.verb === "CHECK"
          ? pick(["0.3.0", "0.3.1"])
          : pick(["0.4.0", "1.0.0"]);
      },
    },
    {
      name: "name",
      verbs: ALL,
      codes: [7],
      apply: setField(["name"], [undefined, "", 5, "a b", "../x", long(300), "x/y", null]),
    },
    {
      name: "type",
      verbs: ALL,
      codes: [7],
      apply: setField(["type"], [undefined, "", 7, "bridge", null]),
      roles: ["main"],
    },
    {
      name: "datapath",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["datapath"], ["macvlan", 1, "", "VETH"]),
    },
    {
      name: "mtu",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["mtu"], [0, 575, 9002, 1500.5, "1500", -1, true, 1e300]),
    },
    {
      name: "serviceCidrs",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["serviceCidrs"], [
        "10.0.0.0/8",
        ["10.0.0.0/33"],
        ["fd00::/64"],
        [1],
        Array(65).fill("10.96.0.0/12"),
      ]),
    },
    {
      name: "nodeIps",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["nodeIps"], [["10.0.0"], ["::1"], {}, Array(65).fill("10.0.0.1")]),
    },
    {
      name: "hostVethPrefix",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["hostVethPrefix"], ["", "ABCDE", "a-b", "toolong", 1]),
    },
    {
      name: "daemonSocket",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["daemonSocket"], ["relative.sock", "", `/${long(200)}`, 5]),
    },
    {
      name: "daemonTimeoutMs",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["daemonTimeoutMs"], [0, 99, 120001, 1.5, "5000"]),
    },
    {
      name: "logFile",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["logFile"], ["relative.log", f.fifo, f.dir, f.socket, "/dev/null", 3]),
    },
    {
      name: "logLevel",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["logLevel"], ["trace", 0, "ERROR"]),
    },
    {
      name: "ipam (main role)",
      verbs: ALL,
      roles: ["main"],
      codes: [2, 7],
      apply: setField(["ipam"], [
        "x",
        { type: "" },
        { type: "../evil" },
        { type: "vpcni", bogus: 1 },
        { type: "vpcni", daemonTimeoutMs: 5 },
        { type: "vpcni", daemonSocket: "rel" },
        [],
      ]),
    },
    {
      name: "ipam section (IPAM role)",
      verbs: ALL,
      roles: ["ipam"],
      codes: [2, 7],
      apply: (d, _w, pick) => {
        const ipam = d.conf.ipam as Conf;
        Object.assign(
          ipam,
          pick([
            { daemonSocket: "rel.sock" },
            { daemonSocket: `/${long(200)}` },
            { daemonTimeoutMs: 99 },
            { routes: "x" },
            { routes: [{ dst: "x" }] },
            { routes: [{ dst: "0.0.0.0/0", gw: "x" }] },
            { routes: [{ dst: "0.0.0.0/0", extra: 1 }] },
            { routes: Array(257).fill({ dst: "0.0.0.0/0" }) },
            { logFile: f.fifo },
            { logFile: f.dir },
            { logLevel: "loud" },
            { bogus: true },
          ]),
        );
      },
    },
    {
      name: "dns",
      verbs: ALL,
      roles: ["main"],
      codes: [7],
      apply: setField(["dns"], [
        "x",
        { nameservers: "8.8.8.8" },
        { nameservers: [1] },
        { nameservers: Array(33).fill("10.0.0.2") },
        { domain: long(5000) },
      ]),
    },
    {
      name: "ipMasq",
      verbs: ALL,
      roles: ["main"],
      codes: [2, 7],
      apply: setField(["ipMasq"], [true, "yes"]),
    },
    {
      name: "capabilities",
      verbs: ALL,
      roles: ["main"],
      codes: [2, 7],
      apply: setField(["capabilities"], [
        { portMappings: true },
        { "io.kubernetes.cri.pod-annotations": "yes" },
        [],
        Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`c${i}`, false])),
      ]),
    },
    {
      name: "unknown top-level field",
      verbs: ALL,
      roles: ["main"],
      codes: [2],
      apply: setField(["bridge"], ["cni0", 1, {}]),
    },
    {
      name: "runtimeConfig",
      verbs: ALL,
      codes: [7],
      apply: setField(["runtimeConfig"], [
        "x",
        { "io.kubernetes.cri.pod-annotations": { a: 1 } },
        { "io.kubernetes.cri.pod-annotations": [] },
        {
          "io.kubernetes.cri.pod-annotations": Object.fromEntries(
            Array.from({ length: 513 }, (_, i) => [`k${i}`, "v"]),
          ),
        },
        { "io.kubernetes.cri.pod-annotations": { "vpcni.io/subnet-selector": long(5000) } },
        { "io.kubernetes.cri.pod-annotations": { big: long(300 * 1024) } },
      ]),
    },
    {
      name: "prevResult",
      verbs: ALL,
      codes: [1, 7],
      apply: setField(["prevResult"], [
        "x",
        { cniVersion: "1.1.0", ips: "x" },
        { cniVersion: "1.1.0", ips: [{ address: "10.0.0.1" }] },
        { cniVersion: "1.1.0", ips: ips(100_000) },
        { cniVersion: "1.1.0", ips: ips(65) },
        { cniVersion: "1.1.0", ips: [], routes: Array(257).fill({ dst: "0.0.0.0/0" }) },
        { cniVersion: "1.1.0", ips: [], interfaces: Array(65).fill({ name: "x" }) },
        { cniVersion: "1.1.0", ips: [], dns: { search: Array(33).fill("x") } },
        { cniVersion: "1.1.0", ips: [{ address: "10.0.0.1/24", interface: "0" }] },
      ]),
    },
    {
      name: "CHECK prevResult that does not match the call",
      verbs: ["CHECK"],
      roles: ["main"],
      codes: [7],
      apply: (d, w, pick) => {
        d.conf.prevResult = pick([
          undefined,
          { cniVersion: "1.1.0", ips: [], interfaces: [] },
          {
            cniVersion: "1.1.0",
            interfaces: [{ name: "eth0", sandbox: w.otherNetns }],
            ips: [{ address: `${w.livePod.ip}/32`, gateway: "169.254.1.1", interface: 0 }],
          },
          {
            cniVersion: "1.1.0",
            interfaces: [{ name: "net9", sandbox: w.livePod.netns }],
            ips: [{ address: `${w.livePod.ip}/32`, gateway: "169.254.1.1", interface: 0 }],
          },
        ]);
      },
    },
    {
      name: "CHECK of an attachment the daemon does not hold",
      verbs: ["CHECK"],
      codes: [3],
      fresh: true,
      apply: () => {},
    },
    {
      name: "cni.dev/valid-attachments",
      verbs: ["GC"],
      codes: [7],
      apply: setField(["cni.dev/valid-attachments"], [
        "x",
        [{ containerID: 1, ifname: "eth0" }],
        [{}],
        Array(16385).fill({ containerID: "c", ifname: "eth0" }),
      ]),
    },
    {
      name: "daemon unreachable",
      verbs: ["ADD", "DEL", "STATUS"],
      codes: [11, 50],
      fresh: true,
      apply: (d, w) => {
        if (d.role === "main") d.conf.daemonSocket = w.deadSocket;
        else (d.conf.ipam as Conf).daemonSocket = w.deadSocket;
      },
    },
    // Kinds whose checks come with the attachment fixes (AWAITING_ATTACHMENT_FIXES).
    {
      name: "second ADD of the live attachment",
      verbs: ["ADD"],
      roles: ["main"],
      codes: [4, 7],
      apply: (d, w, pick) => {
        d.env.CNI_CONTAINERID = w.livePod.containerId;
        d.env.CNI_IFNAME = w.livePod.ifName;
        d.env.CNI_NETNS = pick([w.livePod.netns, w.otherNetns]);
      },
    },
    {
      name: "GC without cni.dev/valid-attachments",
      verbs: ["GC"],
      codes: [7],
      apply: (d) => {
        delete d.conf["cni.dev/valid-attachments"];
        delete d.conf["cni.dev/attachments"];
      },
    },
    {
      name: "mtu below the node's links",
      verbs: ["ADD"],
      roles: ["main"],
      codes: [7],
      fresh: true,
      apply: setField(["mtu"], [576, 1000]),
    },
    {
      name: "ipam.type loopback",
      verbs: ["ADD"],
      roles: ["main"],
      codes: [7, 103, 105],
      fresh: true,
      apply: setField(["ipam"], [{ type: "loopback" }]),
    },
  ];
}

/** Mutations that keep a request valid: fields vpcni ignores or accepts as they are. */
function neutralMutations(): Mutation[] {
  return [
    {
      name: "args (ignored)",
      verbs: ALL,
      codes: [],
      apply: setField(["args"], [{ cni: { labels: [] } }, "x", 7, [], { k8s: null }]),
    },
    {
      name: "CNI_ARGS with IgnoreUnknown",
      verbs: ALL,
      codes: [],
      apply: setEnv("CNI_ARGS", [
        "IgnoreUnknown=1;COLOR=blue",
        "IgnoreUnknown=true;K8S_POD_UID=u-1;K8S_POD_NAMESPACE=ns",
        "",
      ]),
    },
    {
      name: "runtimeConfig with other capabilities",
      verbs: ALL,
      codes: [],
      apply: setField(["runtimeConfig"], [
        { portMappings: [{ hostPort: 80, containerPort: 80 }] },
        { "io.kubernetes.cri.pod-annotations": { "kubernetes.io/config.seen": "now" } },
      ]),
    },
    {
      name: "cniVersions list",
      verbs: ALL,
      codes: [],
      roles: ["main"],
      apply: setField(["cniVersions"], [["1.0.0", "1.1.0"]]),
    },
  ];
}

/** The mutations of a world, built once (some values are megabytes). */
const built = new WeakMap<FuzzWorld, { invalid: Mutation[]; neutral: Mutation[] }>();

/** Builds case `index` of the run with `seed`. */
export function fuzzCase(seed: number, index: number, w: FuzzWorld): FuzzCase {
  const r = rng((seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
  const verb = pick(ALL);
  const role = r() < 0.7 ? "main" : "ipam";
  const version = verb === "GC" || verb === "STATUS"
    ? "1.1.0"
    : verb === "CHECK"
    ? pick(["0.4.0", "1.0.0", "1.1.0"])
    : pick(["0.3.1", "0.4.0", "1.0.0", "1.1.0"]);
  const conf: Conf = role === "main"
    ? {
      cniVersion: version,
      name: w.network,
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: w.socket,
      daemonTimeoutMs: 3000,
    }
    : {
      cniVersion: version,
      name: w.network,
      type: "ptp",
      ipam: { type: "vpcni", daemonSocket: w.socket, daemonTimeoutMs: 3000 },
    };
  const live = w.livePod;
  if (verb === "CHECK") {
    conf.prevResult = {
      cniVersion: version,
      interfaces: [{ name: live.ifName, sandbox: live.netns }],
      ips: [{ address: `${live.ip}/32`, gateway: "169.254.1.1", interface: 0 }],
    };
  }
  if (verb === "GC") {
    conf["cni.dev/valid-attachments"] = [{ containerID: live.containerId, ifname: live.ifName }];
  }
  const d: Draft = {
    verb,
    role,
    conf,
    fresh: false,
    env: {
      CNI_COMMAND: verb,
      CNI_CONTAINERID: live.containerId,
      CNI_NETNS: live.netns,
      CNI_IFNAME: live.ifName,
      CNI_PATH: w.cniPath,
      CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=fuzz",
    },
  };
  const fits = (m: Mutation) => m.verbs.includes(verb) && (!m.roles || m.roles.includes(role));
  let all = built.get(w);
  if (!all) built.set(w, all = { invalid: invalidMutations(w), neutral: neutralMutations() });
  const invalid = all.invalid.filter(fits);
  const chosen: Mutation[] = [];
  for (const m of all.neutral.filter(fits)) if (r() < 0.15) chosen.push(m);
  const n = r() < 0.75 ? 1 : 2;
  for (let i = 0; i < n; i++) chosen.push(pick(invalid));
  const codes = new Set<number>();
  const awaiting: string[] = [];
  for (const m of chosen) {
    if (m.fresh) d.fresh = true;
    m.apply(d, w, pick);
    for (const c of m.codes) codes.add(c);
    if (AWAITING_ATTACHMENT_FIXES.includes(m.name)) awaiting.push(m.name);
  }
  // A fresh attachment only where the mutations left the live pod's id in place; in a
  // netns of its own, since a DEL removes CNI_IFNAME from CNI_NETNS whoever asks.
  if (d.fresh && d.env.CNI_CONTAINERID === live.containerId) {
    d.env.CNI_CONTAINERID = `vcn-fuzz-${index}`;
  }
  if (d.fresh && d.env.CNI_NETNS === live.netns) {
    d.env.CNI_NETNS = w.otherNetns;
    // A copy: mutation values are shared between cases.
    const prev = d.conf.prevResult as { interfaces?: { sandbox?: string }[] } | undefined;
    const first = prev?.interfaces?.[0];
    if (prev && first?.sandbox === live.netns) {
      d.conf.prevResult = {
        ...prev,
        interfaces: [{ ...first, sandbox: w.otherNetns }, ...prev.interfaces!.slice(1)],
      };
    }
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(d.env)) if (v !== undefined) env[k] = v;
  return {
    index,
    verb,
    role,
    mutations: chosen.map((m) => m.name),
    env,
    stdin: d.rawStdin ?? JSON.stringify(d.conf),
    codes: [...codes],
    awaiting,
  };
}
