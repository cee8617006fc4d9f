/**
 * Makes a loopback endpoint of this process reachable from inside another network
 * namespace. The simulator listens on the host's loopback; a simulated node is a netns
 * with a loopback of its own, so the daemon running there reaches the simulator through a
 * TCP forwarder whose listening socket is bound inside the node's netns.
 *
 * @module
 */
import { inNetns } from "../../netlink/netns.ts";

/** A running forwarder. */
export interface NetnsForward {
  /** `http://127.0.0.1:PORT` as seen from inside the netns. */
  url: string;
  /** Stops listening and closes every forwarded connection. */
  close(): void;
}

/**
 * Listens on 127.0.0.1:`port` inside `netnsPath` (0 = any free port) and forwards each
 * connection to `target` on this process's own loopback.
 */
export function forwardIntoNetns(
  netnsPath: string,
  target: URL | string,
  port = 0,
): NetnsForward {
  const dest = new URL(target);
  // The listening socket is created while the thread sits in the netns, so it stays bound
  // there; accepted connections inherit it. Outgoing connects run back in our own netns.
  const listener = inNetns(netnsPath, () => Deno.listen({ hostname: "127.0.0.1", port }));
  const open = new Set<Deno.Conn>();
  let closed = false;
  (async () => {
    for await (const inbound of listener) {
      open.add(inbound);
      pipePair(inbound, dest, open).catch(() => {});
    }
  })().catch(() => {
    if (!closed) throw new Error(`forwarder in ${netnsPath} stopped`);
  });
  const addr = listener.addr as Deno.NetAddr;
  return {
    url: `http://127.0.0.1:${addr.port}`,
    close() {
      closed = true;
      listener.close();
      for (const c of open) {
        try {
          c.close();
        } catch { /* already closed */ }
      }
      open.clear();
    },
  };
}

async function pipePair(inbound: Deno.Conn, dest: URL, open: Set<Deno.Conn>): Promise<void> {
  let outbound: Deno.Conn | undefined;
  try {
    outbound = await Deno.connect({ hostname: dest.hostname, port: Number(dest.port) });
    open.add(outbound);
    await Promise.all([
      inbound.readable.pipeTo(outbound.writable).catch(() => {}),
      outbound.readable.pipeTo(inbound.writable).catch(() => {}),
    ]);
  } finally {
    for (const c of [inbound, outbound]) {
      if (!c) continue;
      open.delete(c);
      try {
        c.close();
      } catch { /* pipeTo may have closed it */ }
    }
  }
}
