/**
 * Snapshots of a netns's networking state (links, addresses, routes in every table,
 * rules, neighbours) via `ip -j`, for tests that assert a CNI call changed nothing or left
 * nothing behind.
 *
 * @module
 */
import { ipJson } from "./sh.ts";

/** One netns's networking state, as `ip -j` prints it. */
export interface KernelState {
  links: unknown[];
  addrs: unknown[];
  routes: unknown[];
  rules: unknown[];
  neigh: unknown[];
}

// Counters and timers that move without anyone changing the configuration.
const VOLATILE = new Set(["stats", "stats64", "used", "confirmed", "updated", "probes"]);

function scrub(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(scrub);
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (!VOLATILE.has(k)) out[k] = scrub(x);
    return out;
  }
  return v;
}

/** Dumps the state of `netns` (a named netns; undefined = the test's own netns). */
export async function kernelState(netns?: string): Promise<KernelState> {
  const [links, addrs, routes, rules, rules6, neigh] = await Promise.all([
    ipJson<unknown[]>(["link", "show"], netns),
    ipJson<unknown[]>(["addr", "show"], netns),
    ipJson<unknown[]>(["route", "show", "table", "all"], netns),
    ipJson<unknown[]>(["-4", "rule", "show"], netns),
    ipJson<unknown[]>(["-6", "rule", "show"], netns),
    ipJson<unknown[]>(["neigh", "show"], netns),
  ]);
  // The kernel adds IPv6 link-local addresses and their routes by itself once DAD settles on
  // a link that came up, at a moment no test controls; vpcni never touches IPv6 link-local.
  const linkLocal = (x: unknown) => String((x as { dst?: string }).dst ?? "").startsWith("fe80");
  const addrsNoLinkLocal = (addrs as { addr_info?: { local?: string }[] }[]).map((a) => ({
    ...a,
    addr_info: (a.addr_info ?? []).filter((i) => !String(i.local ?? "").startsWith("fe80")),
  }));
  // Entries the kernel learns by ARP come, go and change state (STALE, DELAY, PROBE…) with
  // whatever traffic the machine carries; vpcni only ever writes permanent ones.
  const configured = (n: unknown) => {
    const state = (n as { state?: string[] }).state ?? [];
    return state.includes("PERMANENT") || state.includes("NOARP");
  };
  return scrub({
    links,
    addrs: addrsNoLinkLocal,
    routes: routes.filter((r) => !linkLocal(r)),
    rules: [...rules, ...rules6],
    neigh: neigh.filter(configured),
  }) as KernelState;
}

/** Names of the links in `netns`. */
export async function linkNames(netns?: string): Promise<string[]> {
  const links = await ipJson<{ ifname: string }[]>(["link", "show"], netns);
  return links.map((l) => l.ifname);
}
