/**
 * One test node for the datapath tests that call the datapath directly (no plugin binary):
 * a node netns holding a secondary ENI's link, pod netns beside it, and the attachment of
 * each pod. The datapath runs with the thread inside the node netns, so the node netns is
 * "the host" it sees.
 *
 * @module
 */
import assert from "node:assert/strict";
import { inNetns } from "../../netlink/mod.ts";
import type { DatapathConfig, EniInfo, PodAttachment } from "../../cni/datapath/mod.ts";
import { createNetns, deleteNetns, isRoot, type TestNetns, uniqueName } from "./netns.ts";
import { sh } from "./sh.ts";

/** The datapath config these tests start from: veth, MTU 9001, host veths named `vpc…`. */
export const VETH_CFG: DatapathConfig = {
  kind: "veth",
  mtu: 9001,
  serviceCidrs: [],
  nodeIps: [],
  hostVethPrefix: "vpc",
};

/** A secondary ENI (`eni-01`, device 1) on subnet B, 10.0.1.0/24, with the link MAC `mac`. */
export function secondaryEni(mac: string): EniInfo {
  return {
    id: "eni-01",
    mac,
    deviceIndex: 1,
    primary: false,
    subnetId: "subnet-b",
    subnetCidr: "10.0.1.0/24",
    gateway: "10.0.1.1",
    routeTable: 0,
  };
}

/**
 * Pod `i`'s attachment on `eni`: interface `eth0` in `netns`, address 10.0.1.<20+i>/24 with
 * the subnet's gateway 10.0.1.1.
 */
export function podAttachment(
  containerId: string,
  netns: string,
  eni?: EniInfo,
  i = 0,
): PodAttachment {
  return {
    containerId,
    ifName: "eth0",
    netns,
    address: { ip: `10.0.1.${20 + i}`, prefixLen: 24, gateway: "10.0.1.1", eni },
  };
}

/** Fails the test with a clear message unless it runs as root. */
export function requireDatapathRoot(): void {
  assert.ok(isRoot(), "the datapath tests need root (they create network namespaces)");
}

/** Runs `fn` with the thread inside the node's netns, where the datapath acts. */
export function onNode<T>(node: TestNetns, fn: () => T): T {
  return inNetns(node.path, fn);
}

/** The ENI's link on the node: `eth1`, a veth with the ENI's MAC and MTU, its far end `wire1`. */
export async function addEniLink(node: TestNetns, eni: EniInfo, mtu = 9001): Promise<void> {
  await sh(
    ["ip", "link", "add", "eth1", "mtu", String(mtu), "address", eni.mac, "type", "veth"]
      .concat(["peer", "name", "wire1", "mtu", String(mtu)]),
    { netns: node.name },
  );
}

/** How {@linkcode withEniNode} sets the node up. */
export interface EniNodeOptions {
  /** Netns name prefix: the node is `<prefix>n…`, the pods `<prefix>p…`. */
  prefix: string;
  /** The secondary ENI whose link the node holds, and the pods' addresses belong to. */
  eni: EniInfo;
  /** How many pod netns to make (default 1). */
  pods?: number;
  /** MTU of the ENI's link (default 9001). */
  eniMtu?: number;
}

/**
 * Runs `fn` on a node netns with the ENI's link `eth1` (its far end `wire1` up) and empty pod
 * netns; `at(i)` is pod i's attachment: container `ctr-<netns name>`, `eth0`, address
 * 10.0.1.<20+i>/24 on the ENI. Every netns is removed afterwards.
 */
export async function withEniNode(
  opts: EniNodeOptions,
  fn: (node: TestNetns, pods: TestNetns[], at: (i: number) => PodAttachment) => Promise<void>,
): Promise<void> {
  requireDatapathRoot();
  const node = await createNetns(uniqueName(`${opts.prefix}n`));
  const made: TestNetns[] = [];
  try {
    for (let i = 0; i < (opts.pods ?? 1); i++) {
      made.push(await createNetns(uniqueName(`${opts.prefix}p`)));
    }
    await addEniLink(node, opts.eni, opts.eniMtu);
    await sh(["ip", "link", "set", "wire1", "up"], { netns: node.name });
    await fn(
      node,
      made,
      (i) => podAttachment(`ctr-${made[i].name}`, made[i].path, opts.eni, i),
    );
  } finally {
    for (const p of made) await deleteNetns(p.name);
    await deleteNetns(node.name);
  }
}
