/**
 * The daemon's socket is 0600 from its first moment. Tried as an attacker would: the daemon
 * starts with umask 000 in a socket directory that already exists and is open to everyone,
 * while another user (uid 65534) tries to connect in a tight loop to the socket's path and to
 * anything else that appears in that directory. Over many starts that user never connects —
 * and a control socket left open to all in the same directory shows the racer does connect
 * when it can.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { standardScenario } from "./harness.ts";
import { randomPort, writeChildConfig } from "./daemon_process.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** `vpcni serve --config <path>` under umask 000; resolves once /readyz answers 200. */
async function serveWithUmask000(config: string, port: number, log: string) {
  const child = new Deno.Command("sh", {
    args: [
      "-c",
      'umask 000 && exec "$@" 2>>"$0"',
      log,
      Deno.execPath(),
      "run",
      "-A",
      "--no-check",
      MAIN,
      "serve",
      "--config",
      config,
    ],
    env: { AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test" },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const deadline = Date.now() + 60_000;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
      async (r) => (await r.body?.cancel(), r.ok),
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      await child.status;
      throw new Error(`daemon not ready:\n${(await Deno.readTextFile(log)).slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    async stop() {
      child.kill("SIGTERM");
      return (await child.status).code;
    },
  };
}

const STARTS = 12;

/** Connects to every socket-looking path under `dir` until `stop` exists; prints counts. */
const RACER = `
import os, socket, sys, json
root, sock, control, stop = sys.argv[1:5]
hits = {"daemon": 0, "control": 0, "attempts": 0, "refused": 0}
def attempt(path, kind):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(0.2)
    try:
        s.connect(path)
        hits[kind] += 1
    except OSError:
        hits["refused"] += 1
    finally:
        s.close()
    hits["attempts"] += 1
n = 0
while not os.path.exists(stop):
    attempt(sock, "daemon")
    n += 1
    if n % 16 == 0:
        try:
            for e in os.listdir(root):
                if e.startswith("."):
                    attempt(os.path.join(root, e, "s"), "daemon")
        except OSError:
            pass
    if n % 512 == 0:
        attempt(control, "control")
print(json.dumps(hits))
`;

Deno.test("with umask 000 and an open socket dir, another user never connects during start-up", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await Deno.makeTempDir({ prefix: "vip-race-" });
  await Deno.chmod(root, 0o777); // the pre-existing socket directory, open to all
  const sock = `${root}/ipam.sock`;
  const control = `${root}/control.sock`;
  const stop = `${root}/stop`;
  // A socket open to everyone: the racer's connections to it prove it can connect.
  const controlListener = Deno.listen({ transport: "unix", path: control });
  await Deno.chmod(control, 0o777);
  const accepting = (async () => {
    for await (const c of controlListener) c.close();
  })().catch(() => {});
  const racer = new Deno.Command("setpriv", {
    args: [
      "--reuid=65534",
      "--regid=65534",
      "--clear-groups",
      // The system's python: a root-only shim (pyenv) would not run as uid 65534.
      "/usr/bin/python3",
      "-c",
      RACER,
      root,
      sock,
      control,
      stop,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const port = randomPort();
  // The state dir stays root's; the daemon's log goes to a file only root reads.
  const logRoot = await Deno.makeTempDir({ prefix: "vip-race-log-" });
  const config = await writeChildConfig(logRoot, sim, port, {
    socketPath: sock,
    stateDir: `${logRoot}/state`,
  });
  try {
    for (let i = 0; i < STARTS; i++) {
      const d = await serveWithUmask000(config, port, `${logRoot}/daemon.log`);
      try {
        const st = await Deno.lstat(sock);
        assert.ok(st.isSocket);
        assert.equal(st.mode! & 0o777, 0o600, `start ${i}: the socket is 0600`);
        assert.deepEqual(
          [...Deno.readDirSync(root)].map((e) => e.name).filter((n) => n.startsWith(".")),
          [],
          `start ${i}: the private bind directory is gone`,
        );
      } finally {
        assert.equal(await d.stop(), 0);
      }
    }
  } finally {
    await Deno.writeTextFile(stop, "");
    const out = await racer.output();
    controlListener.close();
    await accepting;
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
    await Deno.remove(logRoot, { recursive: true }).catch(() => {});
    const text = new TextDecoder().decode(out.stdout);
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const hits = JSON.parse(text) as Record<string, number>;
    console.log(`racer over ${STARTS} starts: ${text.trim()}`);
    assert.ok(hits.attempts > 1000, `the racer ran (${hits.attempts} attempts)`);
    assert.ok(hits.control > 0, "the racer connects where it may (control socket)");
    assert.equal(hits.daemon, 0, "no connection to the daemon's socket by another user");
  }
});
