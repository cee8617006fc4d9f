/**
 * How many more pods each pool can still host on this node, and so how many devices of
 * `vpcni.io/<pool>` the daemon advertises to the kubelet.
 *
 * room = free addresses (cooling and routed-unknown ones are not free)
 *      + what the pool can still obtain: empty address (or /28 prefix) slots of its ENIs,
 *        then new ENIs on free device indexes (within the instance's limit, the pool's
 *        `maxEnis` and `firstInterfaceIndex`), all bounded by the free addresses the daemon
 *        last saw in the subnets (a subnet EC2 called full counts 0).
 *
 * advertised = addresses held by pods that hold a device of the pool + room.
 *
 * The kubelet (and the scheduler) subtract the devices pods hold, so what is left for new
 * pods is `advertised − devices held` = room − (pods that hold a device but have no address
 * yet): exactly the pods that can still start. Pods of the pool without the resource (an
 * annotation or the default pool) hold addresses but no device; they only shrink the room.
 *
 * Device indexes and subnet addresses are shared by all pools of the node: each pool counts
 * them as its own, so two pools may both advertise the last free ENI slot; the first pod
 * that needs it takes it.
 *
 * @module
 */
import type { GrowthContext } from "../growth.ts";
import type { PoolConfig, SubnetChoice } from "../config.ts";
import { matchSubnets } from "../subnets.ts";

/** The parts of the growth context the arithmetic reads. */
export type CapacityNode = Pick<
  GrowthContext,
  | "state"
  | "subnets"
  | "fullSubnets"
  | "maxEnis"
  | "ipv4PerEni"
  | "foreignDeviceIndexes"
  | "reservedDeviceIndexes"
  | "az"
  | "primarySubnetId"
>;

/** A pool's capacity at one instant, with the parts it adds up from. */
export interface PoolCapacity {
  pool: string;
  /** Free addresses now. */
  free: number;
  /** Addresses the pool can still obtain from EC2 within the limits. */
  growable: number;
  /** free + growable: pods without an address yet that can still get one. */
  room: number;
  /** Addresses held by pods that hold a device of this pool. */
  heldByDevicePods: number;
  /** Devices advertised: heldByDevicePods + room. */
  advertised: number;
}

/** Free device indexes this pool may still put a new ENI on. */
export function newEniSlots(node: CapacityNode, pool: PoolConfig): number {
  const used = node.state.usedDeviceIndexes([
    ...node.foreignDeviceIndexes,
    ...node.reservedDeviceIndexes,
  ]);
  let slots = 0;
  for (let i = Math.max(1, pool.firstInterfaceIndex); i < node.maxEnis; i++) {
    if (!used.has(i)) slots++;
  }
  // The instance limit counts every attached ENI, whatever its index.
  slots = Math.min(slots, Math.max(0, node.maxEnis - used.size));
  if (pool.maxEnis !== undefined) {
    slots = Math.min(slots, Math.max(0, pool.maxEnis - node.state.poolEnis(pool.name).length));
  }
  return slots;
}

/**
 * Addresses the pool can still obtain: empty slots of its ENIs first, then new ENIs in the
 * subnets with the most free addresses, each needing one address of its own.
 */
export function growableAddresses(
  node: CapacityNode,
  pool: PoolConfig,
  choice: SubnetChoice,
  now: number,
): number {
  const slotsPerEni = node.ipv4PerEni - 1;
  const prefix = pool.prefixDelegation;
  const left = new Map<string, number>();
  const freeIn = (id: string) => {
    if (!left.has(id)) {
      const full = (node.fullSubnets.get(id) ?? 0) > now;
      left.set(id, full ? 0 : (node.subnets.find((s) => s.id === id)?.availableIps ?? 0));
    }
    return left.get(id)!;
  };
  // What `slots` empty slots bring from subnet `id`: single addresses, or whole /28s.
  const draw = (id: string, slots: number): number => {
    const have = freeIn(id);
    const n = prefix ? Math.min(slots, Math.floor(have / 16)) : Math.min(slots, have);
    const got = prefix ? n * 16 : n;
    left.set(id, have - got);
    return got;
  };
  let grow = 0;
  for (const eni of node.state.poolEnis(pool.name)) {
    if (eni.full) continue;
    const used = prefix ? eni.prefixes.length : eni.ips.size;
    grow += draw(eni.subnetId, Math.max(0, slotsPerEni - used));
  }
  const candidates = matchSubnets(choice, node.subnets, {
    az: node.az,
    primarySubnetId: node.primarySubnetId,
  }).map((s) => s.id);
  const taken = new Set<string>();
  if (!pool.allowSharedSubnets) { for (const e of node.state.enis.values()) taken.add(e.subnetId); }
  const minFree = prefix ? 17 : 2;
  for (let k = newEniSlots(node, pool); k > 0; k--) {
    let best: string | undefined;
    for (const id of candidates) {
      if (taken.has(id) || freeIn(id) < minFree) continue;
      if (best === undefined || freeIn(id) > freeIn(best)) best = id;
    }
    if (best === undefined) break;
    if (!pool.allowSharedSubnets) taken.add(best);
    left.set(best, freeIn(best) - 1); // the new ENI's own primary address
    grow += draw(best, slotsPerEni);
  }
  return grow;
}

/**
 * The capacity of one pool. `devicePods` tells whether the pod holding an allocation holds a
 * device of this pool (from the kubelet's pod-resources answer).
 */
export function poolCapacity(
  node: CapacityNode,
  pool: PoolConfig,
  choice: SubnetChoice,
  now: number,
  devicePods: (podNamespace: string | undefined, podName: string | undefined) => boolean,
): PoolCapacity {
  const s = node.state.stats(pool.name, now);
  let heldByDevicePods = 0;
  for (const a of node.state.allocations.values()) {
    if (a.pool === pool.name && devicePods(a.podNamespace, a.podName)) heldByDevicePods++;
  }
  const growable = growableAddresses(node, pool, choice, now);
  const room = s.free + growable;
  return {
    pool: pool.name,
    free: s.free,
    growable,
    room,
    heldByDevicePods,
    advertised: heldByDevicePods + room,
  };
}

/**
 * The device ids to advertise: every id the kubelet has handed to a pod (so those stay
 * valid), then `<pool>-0`, `<pool>-1`, … (the lowest not taken) up to `count`. The same
 * count gives the same ids, so allocations the kubelet checkpointed stay valid too.
 */
export function deviceIds(pool: string, count: number, allocated: Iterable<string>): string[] {
  const ids = new Set(allocated);
  for (let k = 0; ids.size < count; k++) ids.add(`${pool}-${k}`);
  return [...ids];
}
