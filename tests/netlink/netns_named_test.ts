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

Deno.test("a netns made before iproute2's first run can still be deleted", async () => {
  requireRoot();
  // A private mount namespace where /run/netns is a plain directory, as on a freshly booted
  // machine: create ours first, then let `ip netns add` bind the directory onto itself (it
  // does so on its first run), then delete ours. Before the run dir was made a mount point
  // of its own first, the delete failed with "Device or resource busy".
  const ours = uniqueName("vnl");
  const theirs = uniqueName("vnl");
  const mod = new URL("../../netlink/netns_named.ts", import.meta.url).href;
  const script = `
    import { createNamedNetns, deleteNamedNetns } from ${JSON.stringify(mod)};
    const sh = (...a) => new Deno.Command(a[0], { args: a.slice(1) }).outputSync();
    while (sh("umount", "-l", "/run/netns").code === 0) { /* back to a plain directory */ }
    createNamedNetns(${JSON.stringify(ours)});
    const add = sh("ip", "netns", "add", ${JSON.stringify(theirs)});
    if (add.code !== 0) throw new Error("ip netns add: " + new TextDecoder().decode(add.stderr));
    deleteNamedNetns(${JSON.stringify(ours)});
    sh("ip", "netns", "del", ${JSON.stringify(theirs)});
    console.log(JSON.stringify({ left: [...Deno.readDirSync("/run/netns")].map((e) => e.name) }));
  `;
  const r = await run([
    "unshare",
    "-m",
    "--propagation",
    "private",
    Deno.execPath(),
    "eval",
    "--unstable-ffi",
    script,
  ]);
  assert.equal(r.code, 0, r.stderr);
  const left = JSON.parse(r.stdout.trim().split("\n").at(-1)!).left as string[];
  assert.ok(!left.includes(ours), `${ours} left behind: ${left.join(" ")}`);
});
