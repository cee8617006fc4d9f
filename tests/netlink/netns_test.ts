import assert from "node:assert/strict";
import {
  createVeth,
  findLink,
  inNetns,
  InvalidInputError,
  NetlinkSocket,
  netnsExists,
  NetnsHandle,
  threadNetnsId,
} from "../../netlink/mod.ts";
import { ipLinks, threadNetnsInode, withSockets } from "./fixture.ts";

Deno.test("inNetns runs the block inside the netns and returns the thread", async () => {
  await withSockets(1, (ns) => {
    const home = threadNetnsInode();
    const target = Deno.statSync(ns.path).ino;
    const seen = inNetns(ns.path, () => threadNetnsInode());
    assert.equal(seen, target);
    assert.notEqual(seen, home);
    assert.equal(threadNetnsInode(), home);
    assert.equal(threadNetnsId(), `net:[${home}]`);
  });
});

Deno.test("the thread comes back to its own netns when the block throws", async () => {
  await withSockets(1, (ns) => {
    const home = threadNetnsInode();
    let inside = 0;
    assert.throws(
      () =>
        inNetns(ns.path, () => {
          inside = threadNetnsInode();
          throw new Error("block failed");
        }),
      /block failed/,
    );
    assert.equal(inside, Deno.statSync(ns.path).ino);
    assert.equal(threadNetnsInode(), home);
  });
});

Deno.test("nested inNetns returns to the enclosing netns, then home", async () => {
  await withSockets(2, (a, b) => {
    const home = threadNetnsInode();
    const [ia, ib] = [Deno.statSync(a.path).ino, Deno.statSync(b.path).ino];
    const trail: number[] = [];
    inNetns(a.path, () => {
      trail.push(threadNetnsInode());
      assert.throws(() =>
        inNetns(b.path, () => {
          trail.push(threadNetnsInode());
          throw new Error("inner");
        })
      );
      trail.push(threadNetnsInode());
    });
    assert.deepEqual(trail, [ia, ib, ia]);
    assert.equal(threadNetnsInode(), home);
  });
});

Deno.test("an async block is refused, and the thread is home again", async () => {
  await withSockets(1, (ns) => {
    const home = threadNetnsInode();
    assert.throws(() => inNetns(ns.path, async () => {}), /must be synchronous/);
    assert.equal(threadNetnsInode(), home);
  });
});

Deno.test("a socket opened in a netns stays bound to it after the thread returns", async () => {
  await withSockets(1, async (ns) => {
    const home = threadNetnsInode();
    using s = NetlinkSocket.openIn(ns.path);
    assert.equal(threadNetnsInode(), home);
    createVeth(s, { name: "vnls0", peerName: "vnls1" });
    assert.ok((await ipLinks(ns)).some((l) => l.ifname === "vnls0"), "created in the netns");
    using hostSock = NetlinkSocket.open();
    assert.equal(findLink(hostSock, "vnls0"), undefined, "not in the thread's own netns");
  });
});

Deno.test("netnsExists, NetnsHandle and a missing path", async () => {
  await withSockets(1, (ns) => {
    assert.equal(netnsExists(ns.path), true);
    assert.equal(netnsExists("/run/netns/vnl-missing"), false);
    const h = NetnsHandle.open(ns.path);
    assert.ok(h.fd >= 0);
    h.close();
    h.close(); // idempotent
    const home = threadNetnsInode();
    assert.throws(() => inNetns("/run/netns/vnl-missing", () => 1), InvalidInputError);
    assert.throws(() => NetlinkSocket.openIn("/run/netns/vnl-missing"), /does not exist/);
    assert.throws(() => NetnsHandle.open("/run/netns/vnl-missing"), InvalidInputError);
    assert.equal(threadNetnsInode(), home);
  });
});
