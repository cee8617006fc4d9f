import assert from "node:assert/strict";
import {
  createNamedNetns,
  createVeth,
  deleteNamedNetns,
  ExistsError,
  InvalidInputError,
  NetlinkSocket,
} from "../../netlink/mod.ts";
import { uniqueName } from "../helpers/netns.ts";
import { run } from "../helpers/sh.ts";
import { ipLinks, requireRoot, threadNetnsInode } from "./fixture.ts";

Deno.test("createNamedNetns makes a netns iproute2 sees; deleteNamedNetns removes it", async () => {
  requireRoot();
  const name = uniqueName("vnl");
  const home = threadNetnsInode();
  try {
    const path = createNamedNetns(name);
    assert.equal(path, `/run/netns/${name}`);
    assert.equal(threadNetnsInode(), home, "the thread is back home");
    assert.notEqual(Deno.statSync(path).ino, home);
    assert.match((await run(["ip", "netns", "list"])).stdout, new RegExp(`^${name}\\b`, "m"));
    using s = NetlinkSocket.openIn(path);
    createVeth(s, { name: "vnlnn0", peerName: "vnlnn1" });
    assert.deepEqual(
      (await ipLinks({ name, path })).map((l) => l.ifname).sort(),
      ["lo", "vnlnn0", "vnlnn1"],
    );
    assert.throws(() => createNamedNetns(name), ExistsError);
  } finally {
    deleteNamedNetns(name);
  }
  assert.doesNotMatch((await run(["ip", "netns", "list"])).stdout, new RegExp(`^${name}\\b`, "m"));
  deleteNamedNetns(name); // a missing one is fine
  assert.throws(() => createNamedNetns("../etc"), InvalidInputError);
  assert.equal(threadNetnsInode(), home);
});
