/**
 * Which pool a pod's addresses come from, read from its annotations: `vpcni.io/pool` names
 * the pool; `vpcni.io/subnet-selector` picks the pool whose subnets all match the selector
 * (the most of them wins); with neither, the default pool. A pod that holds a device of
 * `vpcni.io/<pool>` (the kubelet's pod-resources answer) gets that pool, and an annotation
 * that picks another one is refused.
 *
 * @module
 */
import type { IpamResponse } from "../proto/ipam.ts";
import { annotationSubnetChoice, defaultPoolName, type SubnetChoice } from "./config.ts";
import type { GrowthContext } from "./growth.ts";
import { matchSubnets } from "./subnets.ts";

/** Annotation naming a pod's pool. */
export const ANNOTATION_POOL = "vpcni.io/pool";
/** Annotation choosing a pool by subnet selector. */
export const ANNOTATION_SUBNET_SELECTOR = "vpcni.io/subnet-selector";

/** What the choice reads of the node: its configuration, zone and subnets. */
export type PoolChoiceNode = Pick<GrowthContext, "cfg" | "az" | "primarySubnetId" | "subnets">;

/**
 * Picks the pool for an ADD among `pools` (by name, each with its subnet choice): from the
 * pools whose `vpcni.io/<pool>` devices the pod holds (`resourcePools`, when the kubelet
 * said), else from its annotations. An error response (code 7) when they name no usable
 * pool, or name different pools.
 */
export function choosePool<P extends { choice: SubnetChoice }>(
  annotations: Record<string, string> | undefined,
  pools: ReadonlyMap<string, P>,
  ctx: PoolChoiceNode,
  resourcePools: string[] = [],
): P | IpamResponse {
  if (resourcePools.length === 0) return chooseByAnnotations(annotations, pools, ctx);
  const names = resourcePools.map((p) => `vpcni.io/${p}`).join(", ");
  if (resourcePools.length > 1) {
    return { ok: false, code: 7, msg: `pod requests more than one pool's resource: ${names}` };
  }
  const rt = pools.get(resourcePools[0]);
  if (!rt) {
    return {
      ok: false,
      code: 7,
      msg: `pod requests resource ${names}, but no pool "${resourcePools[0]}" is configured`,
      details: `pools: ${[...pools.keys()].join(", ")}`,
    };
  }
  const named = annotations?.[ANNOTATION_POOL] ?? annotations?.[ANNOTATION_SUBNET_SELECTOR];
  if (named === undefined) return rt;
  const byAnnotation = chooseByAnnotations(annotations, pools, ctx);
  if (byAnnotation === rt) return rt;
  const key = annotations?.[ANNOTATION_POOL] !== undefined
    ? ANNOTATION_POOL
    : ANNOTATION_SUBNET_SELECTOR;
  const otherName = [...pools].find(([, p]) => p === byAnnotation)?.[0];
  const other = otherName === undefined ? "no pool" : `pool "${otherName}"`;
  return {
    ok: false,
    code: 7,
    msg: `annotation ${key}="${named}" picks ${other}, but the pod requests resource ${names}`,
    details: "drop the annotation or make it name the same pool as the resource",
  };
}

function chooseByAnnotations<P extends { choice: SubnetChoice }>(
  annotations: Record<string, string> | undefined,
  pools: ReadonlyMap<string, P>,
  ctx: PoolChoiceNode,
): P | IpamResponse {
  const named = annotations?.[ANNOTATION_POOL];
  if (named !== undefined) {
    const rt = pools.get(named);
    if (rt) return rt;
    return {
      ok: false,
      code: 7,
      msg: `annotation ${ANNOTATION_POOL}="${named}" names no pool`,
      details: `pools: ${[...pools.keys()].join(", ")}`,
    };
  }
  const selText = annotations?.[ANNOTATION_SUBNET_SELECTOR];
  if (selText !== undefined) {
    let choice: SubnetChoice;
    try {
      choice = annotationSubnetChoice(selText);
    } catch (e) {
      return {
        ok: false,
        code: 7,
        msg: `annotation ${ANNOTATION_SUBNET_SELECTOR}: ${(e as Error).message}`,
      };
    }
    const node = { az: ctx.az, primarySubnetId: ctx.primarySubnetId };
    const wanted = new Set(matchSubnets(choice, ctx.subnets, node).map((s) => s.id));
    let best: P | undefined;
    let bestScore = 0;
    for (const rt of pools.values()) {
      const ids = matchSubnets(rt.choice, ctx.subnets, node).map((s) => s.id);
      const inside = ids.filter((id) => wanted.has(id)).length;
      // A pool fits when all its subnets are among the wanted ones; more overlap wins.
      if (inside > bestScore && inside === ids.length) {
        best = rt;
        bestScore = inside;
      }
    }
    if (best) return best;
    return {
      ok: false,
      code: 7,
      msg: `no pool uses only subnets matching ${ANNOTATION_SUBNET_SELECTOR}="${selText}"`,
      details: `matching subnets: ${[...wanted].join(", ") || "none"}`,
    };
  }
  return pools.get(defaultPoolName(ctx.cfg))!;
}
