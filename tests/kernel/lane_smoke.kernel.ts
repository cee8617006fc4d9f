/**
 * Proves the kernel lane works: the tests run on Debian's kernel, and that kernel makes ipvlan
 * slaves that pass traffic. Runs only inside the lane (`deno task test:kernel`); run on a host
 * kernel without ipvlan it fails, saying so.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ipJson, sh } from "../helpers/sh.ts";
import { isRoot, withNetns } from "../helpers/netns.ts";

interface IpLinkDetail {
  ifname: string;
  linkinfo?: { info_kind?: string; info_data?: { mode?: string } };
}

Deno.test("lane: the tests run on Debian's kernel, as root", async () => {
  const version = await Deno.readTextFile("/proc/version");
  assert.match(
    version,
    /Debian/,
    `expected Debian's kernel (run this file through 'deno task test:kernel'); got: ${version}`,
  );
  assert.match(Deno.osRelease(), /-amd64$/);
  assert.ok(isRoot(), "kernel tests need root");
});

Deno.test("lane: the root looks writable, and the host's files are there", async () => {
  // Deno's caches and tests (e.g. host-local's /var/lib/cni) write outside /tmp; inside the
  // lane those writes land in RAM.
  const probe = `/var/tmp/vpcni-lane-probe-${Deno.pid}`;
  await Deno.writeTextFile(probe, "x");
  await Deno.remove(probe);
  assert.ok((await Deno.stat(new URL("../../deno.json", import.meta.url))).isFile);
});

for (const mode of ["l2", "l3s"] as const) {
  Deno.test(`lane: ipvlan ${mode} slaves of a veth in two netns ping each other`, async () => {
    await withNetns(["klh", "klp", "klq"], async (host, podA, podB) => {
      // The veth's first end stands in for an ENI. Both ends go up: without a carrier on the
      // master, its ipvlan slaves stay down too.
      await sh(["ip", "link", "add", "eni", "type", "veth", "peer", "name", "eniwire"], {
        netns: host.name,
      });
      await sh(["ip", "link", "set", "eniwire", "up"], { netns: host.name });
      await sh(["ip", "link", "set", "eni", "up"], { netns: host.name });
      for (const [pod, ip] of [[podA, "10.9.0.11"], [podB, "10.9.0.12"]] as const) {
        await sh(
          ["ip", "link", "add", "link", "eni", "name", "ipv0", "type", "ipvlan", "mode", mode],
          { netns: host.name },
        );
        await sh(["ip", "link", "set", "ipv0", "netns", pod.name], { netns: host.name });
        await sh(["ip", "addr", "add", `${ip}/24`, "dev", "ipv0"], { netns: pod.name });
        await sh(["ip", "link", "set", "ipv0", "up"], { netns: pod.name });
      }

      const [link] = await ipJson<IpLinkDetail[]>(["-d", "link", "show", "ipv0"], podA.name);
      assert.equal(link.linkinfo?.info_kind, "ipvlan");
      assert.equal(link.linkinfo?.info_data?.mode, mode);

      const ping = await sh(["ping", "-c", "1", "-W", "2", "10.9.0.12"], { netns: podA.name });
      assert.match(ping, / 0% packet loss/);
    });
  });
}
