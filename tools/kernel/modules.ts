/**
 * Which kernel modules the lane's initramfs loads, and in what order. The initramfs has no
 * modprobe, so the order is worked out here from the kernel package's `modules.dep`.
 *
 * @module
 */

/**
 * Modules the lane needs, each listed after what it relies on at run time (the 9p transport
 * needs virtio, the root mount needs 9p). Dependencies found in `modules.dep` are added
 * automatically, ahead of the module that needs them.
 */
export const LANE_MODULES: readonly string[] = [
  // The host's root over virtio 9p, and an overlay so the root looks writable inside.
  "virtio_ring",
  "virtio",
  "virtio_pci_modern_dev",
  "virtio_pci_legacy_dev",
  "virtio_pci",
  "netfs",
  "fscache",
  "9pnet",
  "9pnet_virtio",
  "9p",
  "overlay",
  // Entropy, so getrandom() never waits during Deno's start.
  "virtio-rng",
  // Links the tests create.
  "dummy",
  "veth",
  "ipvlan",
  "macvlan",
  "bridge",
  "ifb",
  // nftables as the fabric and the kube-proxy-like DNAT use it. libcrc32c (a dependency of
  // nf_tables) asks the crypto API for crc32c, which modules.dep does not say: a softdep.
  "crc32c_generic",
  "nf_tables",
  "nft_ct",
  "nft_nat",
  "nft_chain_nat",
  "nft_masq",
  "nft_redir",
  "nft_reject_inet",
  "nft_fib_inet",
  "nft_fib_netdev",
  "nft_numgen", // kube-proxy's nftables mode spreads service traffic with numgen
  "nft_hash",
  "nft_limit",
  "nft_quota",
  "nft_objref",
  "nft_fwd_netdev",
  "nft_dup_netdev",
  // Traffic control, as the reference bandwidth plugin uses it.
  "sch_tbf",
  "sch_ingress",
  "act_mirred",
  "cls_u32",
  "cls_matchall",
];

/** Module name as the kernel sees it: dashes and underscores are the same. */
export function normaliseModuleName(name: string): string {
  return name.replaceAll("-", "_");
}

/** Module name of a path in modules.dep, e.g. `kernel/fs/9p/9p.ko.xz` → `9p`. */
export function moduleNameOfPath(path: string): string {
  const base = path.slice(path.lastIndexOf("/") + 1);
  return normaliseModuleName(base.replace(/\.ko(\.(xz|zst|gz))?$/, ""));
}

/** Parsed `modules.dep`: module name → its file (relative) and its dependencies' files. */
export type ModuleDeps = Map<string, { path: string; deps: string[] }>;

/** Parses the text of a `modules.dep` file. */
export function parseModulesDep(text: string): ModuleDeps {
  const out: ModuleDeps = new Map();
  for (const line of text.split("\n")) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const path = line.slice(0, colon).trim();
    const deps = line.slice(colon + 1).trim().split(/\s+/).filter((d) => d !== "");
    out.set(moduleNameOfPath(path), { path, deps });
  }
  return out;
}

/**
 * Orders `wanted` modules and all their dependencies so each comes after what it needs.
 * Names in `builtin` (compiled into the kernel) are skipped; an unknown name is an error that
 * names the module and the kernel.
 */
export function loadOrder(
  wanted: readonly string[],
  deps: ModuleDeps,
  builtin: ReadonlySet<string> = new Set(),
  kernel = "this kernel",
): string[] {
  const order: string[] = [];
  const seen = new Set<string>();
  const visit = (name: string, chain: string[]) => {
    if (seen.has(name)) return;
    const entry = deps.get(name);
    if (!entry) {
      if (builtin.has(name)) return;
      const via = chain.length ? ` (needed by ${chain.join(" → ")})` : "";
      throw new Error(`kernel module '${name}' is not in ${kernel}'s modules.dep${via}`);
    }
    seen.add(name);
    for (const dep of entry.deps) visit(moduleNameOfPath(dep), [...chain, name]);
    order.push(entry.path);
  };
  for (const name of wanted) visit(normaliseModuleName(name), []);
  return order;
}

/** Names of the modules compiled into the kernel, from `modules.builtin`. */
export function parseModulesBuiltin(text: string): Set<string> {
  return new Set(
    text.split("\n").filter((l) => l.trim() !== "").map((l) => moduleNameOfPath(l.trim())),
  );
}
