import assert from "node:assert/strict";
import {
  createVeth,
  InvalidInputError,
  NotFoundError,
  readSysctl,
  writeSysctl,
} from "../../netlink/mod.ts";
import { threadNetnsInode, withSockets } from "./fixture.ts";
import { sh } from "../helpers/sh.ts";

const sysctlIn = async (netns: string, key: string) =>
  (await sh(["sysctl", "-n", key], { netns })).trim();

Deno.test("writeSysctl/readSysctl act inside the given netns only", async () => {
  await withSockets(2, async (a, b) => {
    const home = threadNetnsInode();
    const hostBefore = readSysctl("net.ipv4.ip_forward");
    // A new netns inherits IPv4 settings from the host's, so start both from a known value.
    await sh(["sysctl", "-qw", "net.ipv4.ip_forward=0"], { netns: a.name });
    await sh(["sysctl", "-qw", "net.ipv4.ip_forward=0"], { netns: b.name });
    assert.equal(readSysctl("net.ipv4.ip_forward", a.path), "0");
    writeSysctl("net.ipv4.ip_forward", "1", a.path);
    assert.equal(readSysctl("net/ipv4/ip_forward", a.path), "1");
    assert.equal(await sysctlIn(a.name, "net.ipv4.ip_forward"), "1");
    assert.equal(await sysctlIn(b.name, "net.ipv4.ip_forward"), "0");
    assert.equal(
      readSysctl("net.ipv4.ip_forward"),
      hostBefore,
      "the thread's own netns is untouched",
    );
    assert.equal(threadNetnsInode(), home);
  });
});

Deno.test("per-interface sysctls, with a dotted name in the slash form", async () => {
  await withSockets(1, async (ns) => {
    createVeth(ns.sock, { name: "vnl.10", peerName: "vnlc1" });
    writeSysctl("net/ipv4/conf/vnl.10/rp_filter", "2", ns.path);
    writeSysctl("net.ipv4.conf.vnlc1.proxy_arp", "1", ns.path);
    assert.equal(await sysctlIn(ns.name, "net.ipv4.conf.vnl/10.rp_filter"), "2");
    assert.equal(readSysctl("net.ipv4.conf.vnlc1.proxy_arp", ns.path), "1");
  });
});

Deno.test("sysctl errors: a missing key is NotFoundError, a bad key is refused", async () => {
  await withSockets(1, (ns) => {
    const home = threadNetnsInode();
    assert.throws(
      () => readSysctl("net.ipv4.conf.vnlnothere.rp_filter", ns.path),
      (e: unknown) =>
        e instanceof NotFoundError &&
        e.message === "read sysctl net.ipv4.conf.vnlnothere.rp_filter: No such file or directory",
    );
    assert.equal(threadNetnsInode(), home);
    for (const bad of ["../etc/passwd", "net..ipv4", "net/ipv4/../x", "", "net ipv4"]) {
      assert.throws(() => readSysctl(bad, ns.path), InvalidInputError, bad);
    }
    assert.throws(
      () => writeSysctl("net.ipv4.ip_forward", "1", "/run/netns/vnl-missing"),
      /does not exist/,
    );
  });
});
