/**
 * What is left on a node that names a pod's address after the pod is gone: policy rules,
 * routes in every table and neighbour entries someone configured. Entries the kernel learns
 * by ARP (INCOMPLETE, STALE, …) are left out: a probe or a connection still in flight can make
 * one for an address nobody holds, and it ages out by itself; vpcni writes only permanent ones.
 *
 * @module
 */

/** Lines of `ip -4 rule`, `route show table all` and permanent `neigh` that name `ip`. */
export async function nodeObjectsNaming(
  ip: string,
  ipCommand: (args: string[]) => Promise<string>,
): Promise<string[]> {
  const re = new RegExp(`(^|[^0-9.])${ip.replaceAll(".", "\\.")}([^0-9.]|$)`);
  const out: string[] = [];
  for (
    const args of [["rule"], ["route", "show", "table", "all"], [
      "neigh",
      "show",
      "nud",
      "permanent",
    ]]
  ) {
    out.push(...(await ipCommand(["-4", ...args])).split("\n").filter((l) => re.test(l)));
  }
  return out;
}
