/**
 * Fixtures for the netlink/ kernel tests: fresh netns (prefix `vnl`) with a netlink socket
 * in each, always removed; and iproute2's view of the same objects for comparison.
 *
 * @module
 */

import { NetlinkSocket } from "../../netlink/mod.ts";
import { isRoot, type TestNetns, withNetns } from "../helpers/netns.ts";
import { ipJson, sh } from "../helpers/sh.ts";

/** A test netns with a netlink socket bound inside it. */
export interface NetnsWithSocket extends TestNetns {
  sock: NetlinkSocket;
}

/** Fails clearly when the tests cannot create netns. */
export function requireRoot(): void {
  if (!isRoot()) throw new Error("netlink kernel tests need root (they create network namespaces)");
}

/** Runs `fn` with `count` fresh netns, each with an open socket; all removed afterwards. */
export async function withSockets(
  count: number,
  fn: (...ns: NetnsWithSocket[]) => Promise<void> | void,
): Promise<void> {
  requireRoot();
  await withNetns(new Array(count).fill("vnl"), async (...made) => {
    const withSock: NetnsWithSocket[] = [];
    try {
      for (const ns of made) withSock.push({ ...ns, sock: NetlinkSocket.openIn(ns.path) });
      await fn(...withSock);
    } finally {
      for (const ns of withSock) ns.sock.close();
    }
  });
}

/** `ip -j -d link show` in a netns. */
export function ipLinks(ns: TestNetns): Promise<IpLink[]> {
  return ipJson<IpLink[]>(["-d", "link", "show"], ns.name);
}

/** The fields of `ip -j -d link show` the tests compare. */
export interface IpLink {
  ifindex: number;
  ifname: string;
  flags: string[];
  mtu: number;
  operstate: string;
  address?: string;
  link?: string;
  link_index?: number;
  link_netnsid?: number;
  linkinfo?: { info_kind?: string; info_data?: { mode?: string } };
}

/** Runs an `ip` command inside a test netns (for setting up what netlink/ then reads). */
export function ipIn(ns: TestNetns, args: string[]): Promise<string> {
  return sh(["ip", ...args], { netns: ns.name });
}

/** The inode naming the calling thread's netns. */
export function threadNetnsInode(): number {
  return Deno.statSync("/proc/thread-self/ns/net").ino!;
}
