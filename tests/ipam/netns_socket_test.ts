/**
 * The real daemon's netns socket (ipam/netns_fds.ts), beside its API socket: a unix socket
 * of mode 0600 while it runs, gone after a stop; a stale one a killed daemon left is
 * replaced at the next start (and served), and a client that connects and sends nothing
 * stalls nobody.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { sendNetnsFd } from "../../cni/netns_fd_send.ts";
import { standardScenario, tempRoot } from "./harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "./daemon_process.ts";

Deno.test("the daemon's netns socket: 0600 beside its socket, removed at stop, a stale one replaced", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const port = randomPort();
  const config = await writeChildConfig(root, sim, port, {
    pools: [{ name: "default", warmIps: 1, warmEnis: 0 }],
  });
  const at = `${root}/ipam.sock.netns`;
  try {
    const first = spawnDaemon(root, config, port);
    await first.ready();
    let st = await Deno.lstat(at);
    assert.ok(st.isSocket, "a unix socket");
    assert.equal(st.mode! & 0o777, 0o600);
    // A client that connects and sends nothing: the daemon keeps answering meanwhile.
    const silent = await Deno.connect({ transport: "unix", path: at });
    const r = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(r.status, 200);
    await r.body?.cancel();
    silent.close();
    await first.kill9();
    assert.ok((await Deno.lstat(at)).isSocket, "a killed daemon leaves its socket");

    const second = spawnDaemon(root, config, port);
    await second.ready();
    st = await Deno.lstat(at);
    assert.equal(st.mode! & 0o777, 0o600, "the stale socket was replaced");
    // And served: a netns handed over gets its token (blocking here is fine: the daemon is
    // another process).
    const sent = sendNetnsFd(`${root}/ipam.sock`, "/proc/self/ns/net", 5000);
    assert.ok("token" in sent && /^[0-9a-f]{32}$/.test(sent.token), JSON.stringify(sent));
    assert.equal(await second.stop(), 0);
    await assert.rejects(Deno.lstat(at), Deno.errors.NotFound, "removed at stop");
  } finally {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
