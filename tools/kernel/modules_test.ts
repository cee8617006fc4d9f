import assert from "node:assert/strict";
import { LANE_MODULES, loadOrder, moduleNameOfPath, parseModulesDep } from "./modules.ts";
import { findLaneHost } from "./prereqs.ts";

const DEP =
  `kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/fscache/fscache.ko.xz kernel/fs/netfs/netfs.ko.xz
kernel/net/9p/9pnet.ko.xz:
kernel/fs/fscache/fscache.ko.xz: kernel/fs/netfs/netfs.ko.xz
kernel/fs/netfs/netfs.ko.xz:
kernel/drivers/char/hw_random/virtio-rng.ko.xz:
`;

Deno.test("modules: names ignore compression suffixes and dash/underscore", () => {
  assert.equal(moduleNameOfPath("kernel/fs/9p/9p.ko.zst"), "9p");
  assert.equal(moduleNameOfPath("kernel/drivers/char/hw_random/virtio-rng.ko"), "virtio_rng");
});

Deno.test("modules: every module comes after its dependencies, once", () => {
  const order = loadOrder(["9p", "netfs", "virtio-rng"], parseModulesDep(DEP));
  assert.deepEqual(order.map(moduleNameOfPath), ["9pnet", "netfs", "fscache", "9p", "virtio_rng"]);
});

Deno.test("modules: an unknown module is an error naming who needs it", () => {
  const deps = parseModulesDep("kernel/a.ko: kernel/b.ko\n");
  assert.throws(
    () => loadOrder(["a"], deps, new Set(), "6.1.0-x"),
    /'b' is not in 6.1.0-x's modules.dep \(needed by a\)/,
  );
  assert.deepEqual(loadOrder(["a"], deps, new Set(["b"])), ["kernel/a.ko"]);
});

Deno.test("modules: the installed Debian kernel has every lane module", async () => {
  const host = findLaneHost();
  const deps = parseModulesDep(await Deno.readTextFile(`${host.modulesDir}/modules.dep`));
  const names = loadOrder(LANE_MODULES, deps, new Set(), host.kernelRelease).map(moduleNameOfPath);
  for (const m of ["9p", "ipvlan", "veth", "dummy", "overlay", "nf_tables"]) {
    assert.ok(names.includes(m), `${m} missing from ${names.join(",")}`);
  }
  assert.ok(names.indexOf("virtio_pci") < names.indexOf("9pnet_virtio"));
  assert.ok(names.indexOf("libcrc32c") < names.indexOf("nf_tables"));
});
