import assert from "node:assert/strict";
import { type CapacityNode, deviceIds, newEniSlots, poolCapacity } from "./capacity.ts";
import { configSchema, type PoolConfig, subnetChoice } from "../config.ts";
import { type ManagedEni, NodeState } from "../node_state.ts";
import type { SubnetInfo } from "../cloud.ts";

const NODE_SUBNET = "subnet-0a01";
const OTHER_SUBNET = "subnet-0a02";

function pool(extra: Record<string, unknown> = {}): PoolConfig {
  return configSchema.parse({ pools: [{ name: "a", ...extra }] }).pools[0];
}

function subnet(id: string, availableIps: number): SubnetInfo {
  return { id, cidr: "10.0.0.0/16", az: "az1", availableIps, tags: {} };
}

/** A node with ENIs of 4 addresses (3 for pods each), up to `maxEnis` ENIs. */
function node(o: { maxEnis?: number; subnets?: SubnetInfo[]; ipv4PerEni?: number } = {}) {
  const n: CapacityNode = {
    state: new NodeState("i-1"),
    subnets: o.subnets ?? [subnet(NODE_SUBNET, 1000)],
    fullSubnets: new Map(),
    maxEnis: o.maxEnis ?? 3,
    ipv4PerEni: o.ipv4PerEni ?? 4,
    foreignDeviceIndexes: new Set(),
    reservedDeviceIndexes: new Set(),
    az: "az1",
    primarySubnetId: NODE_SUBNET,
  };
  return n;
}

function addEni(
  n: CapacityNode,
  deviceIndex: number,
  ips: string[],
  extra: Partial<ManagedEni> = {},
) {
  n.state.enis.set(`eni-${deviceIndex}`, {
    id: `eni-${deviceIndex}`,
    mac: `02:00:00:00:00:0${deviceIndex}`,
    deviceIndex,
    subnetId: NODE_SUBNET,
    subnetCidr: "10.0.0.0/16",
    pool: "a",
    primary: deviceIndex === 0,
    primaryIp: `10.0.9.${deviceIndex}`,
    ips: new Set(ips),
    prefixes: [],
    ...extra,
  });
}

const attach = (c: string, name = c) => ({
  network: "net",
  containerId: c,
  ifName: "eth0",
  podNamespace: "default",
  podName: name,
});
const none = () => false;

Deno.test("capacity: free now plus empty slots plus new ENIs, up to the instance's limit", () => {
  const n = node();
  addEni(n, 0, ["10.0.0.1", "10.0.0.2"]);
  const p = pool();
  // 2 free, 1 empty slot on eni-0, two more ENIs of 3 each.
  assert.deepEqual(poolCapacity(n, p, subnetChoice(p), 0, none), {
    pool: "a",
    free: 2,
    growable: 7,
    room: 9,
    heldByDevicePods: 0,
    advertised: 9,
  });
  assert.equal(newEniSlots(n, p), 2);
  n.foreignDeviceIndexes.add(2); // an ENI the daemon does not manage takes a slot
  assert.equal(poolCapacity(n, p, subnetChoice(p), 0, none).room, 6);
  const capped = pool({ maxEnis: 1 });
  assert.equal(poolCapacity(n, capped, subnetChoice(capped), 0, none).room, 3, "maxEnis caps it");
});

Deno.test("capacity: cooling and routed-unknown addresses are not room; pods' are not either", () => {
  const n = node({ maxEnis: 1 });
  addEni(n, 0, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
  const p = pool();
  const cap = () => poolCapacity(n, p, subnetChoice(p), 1000, none);
  assert.equal(cap().room, 3);
  n.state.take("a", 1000, attach("c1"));
  assert.equal(cap().room, 2);
  n.state.release("net/c1/eth0", 1000, 30_000);
  assert.equal(cap().room, 2, "the released address cools down: not room yet");
  assert.equal(poolCapacity(n, p, subnetChoice(p), 31_000, none).room, 3, "back after cooldown");
  n.state.routedUnknown.add("10.0.0.2");
  assert.equal(cap().room, 1);
});

Deno.test("capacity: advertised = addresses of pods holding a device + room", () => {
  const n = node({ maxEnis: 1 });
  addEni(n, 0, ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
  const p = pool();
  n.state.take("a", 0, attach("c1", "with-device"));
  n.state.take("a", 0, attach("c2", "annotated"));
  const holds = (_ns: string | undefined, name: string | undefined) => name === "with-device";
  const c = poolCapacity(n, p, subnetChoice(p), 0, holds);
  assert.deepEqual([c.room, c.heldByDevicePods, c.advertised], [1, 1, 2]);
  // The kubelet subtracts the one device held: one pod more fits, as there is one address.
});

Deno.test("capacity: subnets bound the growth; a subnet EC2 called full counts 0", () => {
  const n = node({ subnets: [subnet(NODE_SUBNET, 4)] });
  addEni(n, 0, ["10.0.0.1"]);
  const p = pool();
  const cap = () => poolCapacity(n, p, subnetChoice(p), 0, none);
  // 1 free; 2 empty slots (2 of the 4 free subnet addresses); then one new ENI: 1 for its
  // own address, 1 left for a pod; a third ENI finds the subnet empty.
  assert.deepEqual([cap().free, cap().growable], [1, 3]);
  n.fullSubnets.set(NODE_SUBNET, 60_000);
  assert.equal(cap().growable, 0);
  n.fullSubnets.clear();
  n.state.enis.get("eni-0")!.full = true; // EC2 said the ENI takes no more addresses
  // Only new ENIs now: the first takes 1 of the 4 for itself and 3 for pods; the next finds none.
  assert.equal(cap().growable, 3);
});

Deno.test("capacity: a pool without shared subnets puts one ENI per free subnet", () => {
  const n = node({ maxEnis: 4, subnets: [subnet(NODE_SUBNET, 100), subnet(OTHER_SUBNET, 100)] });
  addEni(n, 0, []);
  const p = pool({ subnets: { ids: [NODE_SUBNET, OTHER_SUBNET] }, allowSharedSubnets: false });
  // eni-0 sits in the node subnet (3 slots); only the other subnet may take a new ENI.
  assert.equal(poolCapacity(n, p, subnetChoice(p), 0, none).growable, 6);
  const shared = pool({ subnets: { ids: [NODE_SUBNET, OTHER_SUBNET] } });
  assert.equal(poolCapacity(n, shared, subnetChoice(shared), 0, none).growable, 12);
});

Deno.test("capacity: prefix delegation counts whole /28s the subnet still has", () => {
  const n = node({ maxEnis: 2, subnets: [subnet(NODE_SUBNET, 40)] });
  addEni(n, 0, [], { prefixes: [] });
  const p = pool({ prefixDelegation: true });
  // eni-0: 3 prefix slots but 40 free addresses hold 2 /28s (32); the 8 left cannot start
  // a new ENI's prefix (it needs 1 + 16).
  assert.equal(poolCapacity(n, p, subnetChoice(p), 0, none).growable, 32);
});

Deno.test("device ids: held ids stay listed, the rest fill from the lowest index", () => {
  assert.deepEqual(deviceIds("a", 3, []), ["a-0", "a-1", "a-2"]);
  assert.deepEqual(deviceIds("a", 3, ["a-2"]), ["a-2", "a-0", "a-1"]);
  assert.deepEqual(deviceIds("a", 2, ["a-5"]), ["a-5", "a-0"]);
  assert.deepEqual(deviceIds("a", 1, ["a-5", "a-7"]), ["a-5", "a-7"], "never drops a held id");
  assert.deepEqual(deviceIds("a", 0, []), []);
});
