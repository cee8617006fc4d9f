import assert from "node:assert/strict";
import { run } from "../helpers/sh.ts";
import { ipLinks, withSockets } from "./fixture.ts";

const PROBE = `
import { createVeth, NetlinkSocket, PermissionError } from "${
  new URL("../../netlink/mod.ts", import.meta.url).href
}";
try {
  createVeth(NetlinkSocket.open(), { name: "vnlperm0", peerName: "vnlperm1" });
  console.log("created");
} catch (e) {
  console.log(JSON.stringify({ permission: e instanceof PermissionError, message: e.message }));
}
`;

Deno.test("without CAP_NET_ADMIN a change is a PermissionError and nothing is created", async () => {
  await withSockets(1, async (ns) => {
    const script = await Deno.makeTempFile({ prefix: "vnlperm", suffix: ".ts" });
    try {
      await Deno.writeTextFile(script, PROBE);
      // A real privilege drop: the process runs without CAP_NET_ADMIN inside the test netns.
      const r = await run([
        "setpriv",
        "--bounding-set=-net_admin",
        "--inh-caps=-net_admin",
        Deno.execPath(),
        "run",
        "-A",
        "--no-check",
        script,
      ], { netns: ns.name });
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), {
        permission: true,
        message: "RTM_NEWLINK vnlperm0: Operation not permitted",
      });
      assert.deepEqual((await ipLinks(ns)).map((l) => l.ifname), ["lo"]);
    } finally {
      await Deno.remove(script);
    }
  });
});
