/**
 * The cheap half of keeping the node state true: comparing it with the instance metadata.
 * IMDS answers from the node itself and is not counted against the account's EC2 API
 * budget, so the daemon reads it every minute and pays for an EC2 re-sync only when the
 * two disagree (or when the long EC2 period comes round).
 *
 * @module
 */
import type { GrowthContext } from "./growth.ts";
import type { TrackedCloud } from "./ec2_sync.ts";
import { podAddresses } from "./subnets.ts";

/**
 * How long after a mutating EC2 call IMDS may still show the old state. AWS updates the
 * metadata a few seconds after an assign or attach; a disagreement inside this window is
 * left for the next check instead of paying for an EC2 re-sync that would find nothing.
 */
export const IMDS_SETTLE_MS = 10_000;

/**
 * Compares the managed ENIs with what IMDS shows. Returns one line per disagreement (empty
 * when they agree), or `undefined` when the comparison was skipped because a mutating call
 * is in flight or ended less than `settleMs` ago.
 */
export async function imdsDisagreements(
  ctx: GrowthContext,
  cloud: TrackedCloud,
  settleMs = IMDS_SETTLE_MS,
): Promise<string[] | undefined> {
  const settled = () =>
    cloud.mutationsInFlight() === 0 && ctx.now() - cloud.lastMutationAt() >= settleMs;
  if (!settled()) return undefined;
  const epoch = cloud.mutationEpoch();
  const node = await cloud.nodeMetadata();
  if (cloud.mutationEpoch() !== epoch || !settled()) return undefined;

  const found: string[] = [];
  const byId = new Map(node.enis.map((e) => [e.eniId, e]));
  for (const eni of ctx.state.enis.values()) {
    const seen = byId.get(eni.id);
    if (!seen) {
      found.push(`${eni.id} is managed here but not attached`);
      continue;
    }
    const truth = podAddresses(seen.localIpv4s.slice(1), seen.ipv4Prefixes);
    const missing = [...eni.ips].filter((ip) => !truth.has(ip));
    const extra = [...truth].filter((ip) => !eni.ips.has(ip));
    if (missing.length) found.push(`${eni.id} lacks ${summarise(missing)}`);
    if (extra.length) found.push(`${eni.id} has unknown ${summarise(extra)}`);
  }
  for (const seen of node.enis) {
    if (ctx.state.enis.has(seen.eniId) || ctx.creating.has(seen.eniId)) continue;
    if (ctx.foreignDeviceIndexes.has(seen.deviceIndex)) continue;
    if (ctx.reservedDeviceIndexes.has(seen.deviceIndex)) continue;
    found.push(`${seen.eniId} is attached at index ${seen.deviceIndex} but unknown here`);
  }
  return found;
}

function summarise(ips: string[]): string {
  const shown = ips.slice(0, 3).join(", ");
  return ips.length > 3 ? `${shown} and ${ips.length - 3} more` : shown;
}
