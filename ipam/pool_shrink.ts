/**
 * The release side of the warm loop: gives a pool's surplus back to EC2. Whole idle ENIs go
 * first, highest device index first; then single addresses, or whole /28 prefixes when the
 * pool uses prefix delegation. The warm loop (ipam/warm_loop.ts) decides when a surplus has
 * lasted long enough to be released, and how much it is; the growth service calls this.
 *
 * @module
 */
import type { PoolConfig } from "./config.ts";
import { deleteDetached } from "./eni_lifecycle.ts";
import type { GrowthContext } from "./growth.ts";
import { log } from "./log.ts";

/**
 * Releases up to `surplus` free addresses of `pool`. An ENI is released only when none of its
 * addresses is held or cooling and all of them fit in what is left of the surplus; it is
 * marked `releasing` before the detach is asked for, so no ADD can take its addresses
 * meanwhile, and leaves the node state only once EC2 accepted the detach. `onEniReleased` runs
 * after each ENI is deleted, before the next release starts (one fewer ENI may end an
 * ENI-limit exhaustion). A failed EC2 call stops the release and is thrown; an ENI, a prefix
 * or single addresses EC2 refused to let go stay in the pool, and the next warm-loop step
 * tries again.
 */
export async function releaseSurplus(
  ctx: GrowthContext,
  pool: PoolConfig,
  surplus: number,
  onEniReleased: () => void,
): Promise<void> {
  const { state, cloud, metrics } = ctx;
  const now = ctx.now();
  const name = pool.name;
  // Whole ENIs first, highest device index first: no pod, nothing cooling.
  for (const eni of state.poolEnis(name).reverse()) {
    if (eni.primary || !eni.attachmentId) continue;
    const idle = [...eni.ips].every((ip) => state.isFree(ip, now));
    if (!idle || eni.ips.size > surplus) continue;
    eni.releasing = true; // synchronously: no ADD can take its addresses now
    log.info("releasing idle ENI {eniId} of pool {pool}", { eniId: eni.id, pool: name });
    try {
      await cloud.detachEni(eni.attachmentId);
    } catch (e) {
      eni.releasing = false; // still attached: its addresses serve the pool again
      throw e;
    }
    surplus -= eni.ips.size;
    try {
      await deleteDetached(ctx, eni);
    } finally {
      // EC2 accepted the detach: the ENI leaves the node even if its delete failed (the
      // leaked-ENI collector deletes an "available" ENI carrying our tags).
      state.enis.delete(eni.id);
    }
    metrics.enisDeleted.inc({ reason: "surplus" });
    onEniReleased();
  }
  // A pool sized in ENIs keeps the addresses of the ENIs it keeps (as the AWS VPC CNI's
  // WARM_ENI_TARGET does): giving single addresses back only to assign them again is churn.
  if (surplus <= 0 || (pool.warmEnis > 0 && pool.warmIps === 0)) return;
  for (const eni of state.poolEnis(name).reverse()) {
    if (surplus <= 0) break;
    if (pool.prefixDelegation) {
      for (const prefix of [...eni.prefixes]) {
        const addrs = eni.ips.size ? [...eni.ips].filter((ip) => ipInPrefix(ip, prefix)) : [];
        if (addrs.length > surplus || !addrs.every((ip) => state.isFree(ip, now))) continue;
        // Out of the pool synchronously (no ADD takes them during the call), back in when EC2
        // refuses: they are still assigned, and the next warm-loop step tries again.
        for (const ip of addrs) eni.ips.delete(ip);
        eni.prefixes = eni.prefixes.filter((p) => p !== prefix);
        try {
          await cloud.unassignPrefixes({ eniId: eni.id, prefixes: [prefix] });
        } catch (e) {
          for (const ip of addrs) eni.ips.add(ip);
          if (!eni.prefixes.includes(prefix)) eni.prefixes.push(prefix);
          throw e;
        }
        surplus -= addrs.length;
        metrics.ipsUnassigned.inc({ pool: name }, addrs.length);
      }
      continue;
    }
    const spare = [...eni.ips].filter((ip) => state.isFree(ip, now)).slice(0, surplus);
    if (spare.length === 0) continue;
    for (const ip of spare) eni.ips.delete(ip);
    surplus -= spare.length;
    try {
      await cloud.unassignIps({ eniId: eni.id, ips: spare });
      eni.full = false;
      metrics.ipsUnassigned.inc({ pool: name }, spare.length);
    } catch (e) {
      for (const ip of spare) eni.ips.add(ip); // still assigned: keep using them
      throw e;
    }
  }
}

/** Whether an IPv4 address lies in a delegated /28 prefix (the length after "/" is not read). */
function ipInPrefix(ip: string, prefix: string): boolean {
  const [base] = prefix.split("/");
  const a = ip.split(".");
  const b = base.split(".");
  return a[0] === b[0] && a[1] === b[1] && a[2] === b[2] &&
    (Number(a[3]) & 0xf0) === (Number(b[3]) & 0xf0);
}
