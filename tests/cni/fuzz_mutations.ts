/**
 * The mutations of the CNI fuzz test (tests/cni/fuzz_cases.ts builds cases from them): the
 * invalid ones, each with the verbs and roles where it makes a request invalid and the codes
 * it may cause, and the neutral ones, which keep a request valid.
 *
 * @module
 */
import type { FuzzWorld, Verb } from "./fuzz_cases.ts";
import { envMutations } from "./fuzz_env_mutations.ts";

/** A network configuration being built. */
export type Conf = Record<string, unknown>;

/** The request being built. */
export interface Draft {
  verb: Verb;
  role: "main" | "ipam";
  env: Record<string, string | undefined>;
  conf: Conf;
  /** Replaces the JSON of `conf` when set (stdin that is not a config at all). */
  rawStdin?: string;
  /** True when the container id must not be the live pod's (see `fresh`). */
  fresh: boolean;
}

/** One kind of change to a request. */
export interface Mutation {
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

/** Every verb the fuzz drives. */
export const ALL: Verb[] = ["ADD", "DEL", "CHECK", "GC", "STATUS"];
/** The verbs that act on a pod. */
export const POD: Verb[] = ["ADD", "DEL", "CHECK"];

/** Sets a CNI_* variable to one of `values` (undefined unsets it). */
export function setEnv(name: string, values: readonly (string | undefined)[]) {
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
    const last = path[path.length - 1];
    // Defined, not assigned: assigning "__proto__" would set the prototype, not a key.
    if (v === undefined) delete o[last];
    else {Object.defineProperty(o, last, {
        value: v,
        enumerable: true,
        writable: true,
        configurable: true,
      });}
  };
}

/** `n` times `c`. */
export const long = (n: number, c = "a"): string => c.repeat(n);
const ips = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ address: `10.9.${(i >> 8) & 255}.${i & 255}/32` }));

/** The invalid mutations. In the IPAM role the `ipam` section is the plugin's own config. */
export function invalidMutations(w: FuzzWorld): Mutation[] {
  const f = w.files;
  return [
    ...envMutations(w),
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
      apply: (d, w, pick) =>
        setField([pick(["bridge", "__proto__", "constructor", "toString", "hasOwnProperty"])], [
          "cni0",
          1,
          {},
          { isAdmin: true },
        ])(d, w, pick),
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
    // The main plugin's DEL succeeds with the daemon down: it removes the pod's host objects
    // itself and the daemon's reconcile frees the address (tests/cni/del_test.ts).
    {
      name: "daemon unreachable",
      verbs: ["ADD", "STATUS"],
      roles: ["main"],
      codes: [11, 50],
      fresh: true,
      apply: (d, w) => {
        d.conf.daemonSocket = w.deadSocket;
      },
    },
    {
      name: "daemon unreachable (IPAM role)",
      verbs: ["ADD", "DEL", "STATUS"],
      roles: ["ipam"],
      codes: [11, 50],
      fresh: true,
      apply: (d, w) => {
        (d.conf.ipam as Conf).daemonSocket = w.deadSocket;
      },
    },
    // Kinds refused by the attachment rules (cni/README.md, "Attachments").
    {
      name: "second ADD of the live attachment",
      verbs: ["ADD"],
      roles: ["main"],
      codes: [106],
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
export function neutralMutations(): Mutation[] {
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
