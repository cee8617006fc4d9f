import assert from "node:assert/strict";
import { netnsFileProblem, podNetnsExists, snapshotNetns } from "./kernel.ts";

Deno.test("netns paths: only namespace files pass; a FIFO is refused without being opened", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vqa-netns-" });
  try {
    const fifo = `${dir}/fifo`;
    assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
    await Deno.writeTextFile(`${dir}/file`, "x");
    const sock = Deno.listen({ transport: "unix", path: `${dir}/sock` });
    try {
      const cases: [string, RegExp | undefined][] = [
        ["/proc/self/ns/net", undefined],
        ["/proc/thread-self/ns/net", undefined],
        [fifo, /is a FIFO, not a network namespace/],
        [`${dir}/file`, /is a regular file, not a network namespace/],
        ["/dev/null", /is a character device, not a network namespace/],
        [`${dir}/sock`, /is a socket, not a network namespace/],
        [dir, /is a directory, not a network namespace/],
        [`${dir}/missing`, /no such file/],
      ];
      for (const [path, want] of cases) {
        const p = netnsFileProblem(path);
        if (want) assert.match(p ?? "", want, path);
        else assert.equal(p, undefined, path);
        assert.equal(podNetnsExists(path), want === undefined, path);
      }
      // Were the FIFO opened, this would block the thread for ever (no writer ever comes).
      assert.throws(
        () => snapshotNetns(fifo),
        /netns .*\/fifo: is a FIFO, not a network namespace; not read/,
      );
    } finally {
      sock.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
