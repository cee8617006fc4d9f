import assert from "node:assert/strict";
import { checkNetnsFile } from "./netns_file.ts";
import { CniError } from "./errors.ts";

function refusedWith(fn: () => unknown, code: number, re: RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof CniError, String(e));
    assert.equal(e.code, code, e.message);
    assert.match(e.message, re);
    return true;
  });
}

Deno.test("CNI_NETNS naming the plugin's own netns is refused for ADD, CHECK and DEL", () => {
  for (const verb of ["ADD", "CHECK", "DEL"] as const) {
    for (const p of ["/proc/self/ns/net", "/proc/thread-self/ns/net", `/proc/${Deno.pid}/ns/net`]) {
      refusedWith(() => checkNetnsFile(p, verb), 4, /node's own network namespace/);
    }
  }
});

Deno.test("namespaces of other types are named and refused", () => {
  const types: [string, RegExp][] = [
    ["mnt", /a mount namespace/],
    ["uts", /a UTS namespace/],
    ["ipc", /an IPC namespace/],
    ["user", /a user namespace/],
    ["pid", /a PID namespace/],
    ["cgroup", /a cgroup namespace/],
  ];
  for (const [ns, re] of types) {
    for (const verb of ["ADD", "DEL"] as const) {
      refusedWith(() => checkNetnsFile(`/proc/self/ns/${ns}`, verb), 4, re);
    }
  }
});

Deno.test("files that are not namespaces are refused without blocking; missing ones are gone", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-nsf-" });
  try {
    const fifo = `${dir}/fifo`;
    await new Deno.Command("mkfifo", { args: [fifo] }).output();
    const empty = `${dir}/empty`;
    await Deno.writeTextFile(empty, "");
    const full = `${dir}/full`;
    await Deno.writeTextFile(full, "not a namespace");
    const sock = `${dir}/sock`;
    const listener = Deno.listen({ transport: "unix", path: sock });
    try {
      for (const verb of ["ADD", "CHECK", "DEL"] as const) {
        refusedWith(() => checkNetnsFile(fifo, verb), 4, /is a FIFO, not a network namespace/);
        refusedWith(() => checkNetnsFile(sock, verb), 4, /is a unix socket/);
        refusedWith(() => checkNetnsFile("/dev/null", verb), 4, /is a character device/);
        refusedWith(() => checkNetnsFile(dir, verb), 4, /is a directory/);
        refusedWith(() => checkNetnsFile(full, verb), 4, /is a regular file/);
        refusedWith(() => checkNetnsFile("run/netns/x", verb), 4, /not an absolute path/);
        refusedWith(() => checkNetnsFile(`/${"a".repeat(5000)}`, verb), 4, /longer than 4095/);
      }
      // An empty file is what a netns name becomes when its mount is gone: DEL goes on
      // without the pod side, ADD and CHECK refuse it.
      assert.equal(checkNetnsFile(empty, "DEL"), "gone");
      refusedWith(() => checkNetnsFile(empty, "ADD"), 4, /is a regular file/);
      for (const missing of [`${dir}/nope`, `${full}/below-a-file`]) {
        assert.equal(checkNetnsFile(missing, "DEL"), "gone");
        refusedWith(() => checkNetnsFile(missing, "ADD"), 3, /does not exist/);
        refusedWith(() => checkNetnsFile(missing, "CHECK"), 3, /does not exist/);
      }
    } finally {
      listener.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("another network namespace passes, by its name or a symlink to it", async () => {
  const name = `vpcni-nsf-${Deno.pid}`;
  await new Deno.Command("ip", { args: ["netns", "add", name] }).output();
  const link = await Deno.makeTempFile({ prefix: "vpcni-nsf-link-" });
  try {
    await Deno.remove(link);
    await Deno.symlink(`/run/netns/${name}`, link);
    for (const verb of ["ADD", "CHECK", "DEL"] as const) {
      assert.equal(checkNetnsFile(`/run/netns/${name}`, verb), "netns");
      assert.equal(checkNetnsFile(link, verb), "netns");
    }
  } finally {
    await Deno.remove(link).catch(() => {});
    await new Deno.Command("ip", { args: ["netns", "del", name] }).output();
  }
});

Deno.test("a /proc path of a process that is gone counts as missing", () => {
  // No pid is this large (pid_max is at most 2^22): the process of a pod that exited.
  const gone = "/proc/99999999/ns/net";
  assert.equal(checkNetnsFile(gone, "DEL"), "gone");
  refusedWith(() => checkNetnsFile(gone, "ADD"), 3, /does not exist/);
});
