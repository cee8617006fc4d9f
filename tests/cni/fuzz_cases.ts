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
import {
  ALL,
  type Conf,
  type Draft,
  invalidMutations,
  type Mutation,
  neutralMutations,
} from "./fuzz_mutations.ts";

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
}

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
  for (const m of chosen) {
    if (m.fresh) d.fresh = true;
    m.apply(d, w, pick);
    for (const c of m.codes) codes.add(c);
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
  };
}
