/**
 * The daemon's own state and configuration, tried as a mistaken operator would: a second
 * `vpcni serve` on a state directory in use, route tables that collide with the kernel's,
 * something other than a stale socket at `socketPath`, an empty or broken config file, an
 * unreachable IMDS, a state directory that is a file or cannot be written, unbounded
 * cooldowns. Each is refused by the real `vpcni serve` (against the simulator), naming the
 * file or knob and the fix, with a non-zero exit and nothing created or changed.
 */
import assert from "node:assert/strict";
import { stringify } from "yaml";
import { startSim } from "../../aws/sim/mod.ts";
import { ipamClient, standardScenario, tempRoot } from "./harness.ts";
import { randomPort, spawnDaemon, writeChildConfig } from "./daemon_process.ts";
import { CHECKPOINT_FILE } from "../../ipam/checkpoint.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** `vpcni serve ...args`, killed if it has not exited within `ms` (a hang is a failure). */
async function serve(args: string[], ms = 60_000, wrap: string[] = []) {
  const argv = [...wrap, Deno.execPath(), "run", "-A", "--no-check", MAIN, "serve", ...args];
  const started = Date.now();
  const out = await new Deno.Command(argv[0], {
    args: argv.slice(1),
    env: { AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test" },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(ms),
  }).output();
  return {
    code: out.code,
    signal: out.signal,
    ms: Date.now() - started,
    stderr: new TextDecoder().decode(out.stderr),
  };
}

const exists = (p: string) => Deno.lstat(p).then(() => true, () => false);
const names = (dir: string) => [...Deno.readDirSync(dir)].map((e) => e.name).sort();
/** The one `vpcni serve:` line of a refusal (log lines are JSON). */
const said = (stderr: string) =>
  stderr.split("\n").filter((l) => l.startsWith("vpcni serve: ")).join("\n");

Deno.test("a second vpcni serve on a state dir in use refuses at once, naming the holder's pid", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  const port = randomPort();
  const first = spawnDaemon(root, await writeChildConfig(root, sim, port, {}), port);
  try {
    await first.ready();
    const lock = `${root}/state/ipam.lock`;
    assert.equal(await Deno.readTextFile(lock), `${first.child.pid}\n`, "the holder's pid");
    // What the checkpoint holds (the running daemon rewrites it, with a new savedAt).
    const held = async () => {
      const { savedAt: _, ...rest } = JSON.parse(
        await Deno.readTextFile(`${root}/state/${CHECKPOINT_FILE}`),
      );
      return rest;
    };
    const checkpoint = await held();
    // Same state dir; own socket and port, so the lock alone stands in the way.
    const other = `${root}/other.yaml`;
    await Deno.writeTextFile(
      other,
      stringify({
        socketPath: `${root}/other.sock`,
        stateDir: `${root}/state`,
        listen: `127.0.0.1:${randomPort()}`,
        ec2Endpoint: sim.ec2Endpoint,
        imdsEndpoint: sim.imdsEndpointFor("i-0aaaaaaaaaaaaaaa1"),
      }),
    );
    for (const config of [other, `${root}/config.yaml`]) {
      const r = await serve(["--config", config]);
      console.log(`second serve refused in ${r.ms} ms (process start included)`);
      assert.equal(r.signal, null, `it waited on the lock until killed:\n${r.stderr}`);
      assert.equal(r.code, 3, r.stderr);
      assert.match(
        said(r.stderr),
        new RegExp(
          `^vpcni serve: stateDir ${root}/state: another vpcni serve \\(pid ${first.child.pid}\\) ` +
            `holds ${root}/state/ipam\\.lock; .*kill ${first.child.pid}.*--state-dir`,
        ),
      );
    }
    assert.equal(await exists(`${root}/other.sock`), false, "no socket of its own");
    assert.equal(await Deno.readTextFile(lock), `${first.child.pid}\n`, "lock file untouched");
    assert.deepEqual(await held(), checkpoint, "checkpoint untouched");
    const status = await ipamClient(`${root}/ipam.sock`).call({ op: "status" });
    assert.ok(status.ok, "the first daemon still answers on its socket");
  } finally {
    await first.stop();
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("routeTableBase and time knobs out of their documented bounds are refused at parse", async () => {
  const root = await tempRoot();
  try {
    const base = { socketPath: `${root}/ipam.sock`, stateDir: `${root}/state` };
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { routeTableBase: 253 },
        /routeTableBase: 253 is unusable: device index 0 would use table 253 \(default\), device index 1 would use table 254 \(main\), device index 2 would use table 255 \(local\)\..* use 1–189 or 256–2147483584, e\.g\. 100 \(the default\) or 256/,
      ],
      [
        { routeTableBase: 190 },
        /routeTableBase: 190 is unusable: device index 63 would use table 253/,
      ],
      [{ routeTableBase: 200 }, /device index 54 would use table 254 \(main\)/],
      [{ routeTableBase: 255 }, /device index 0 would use table 255 \(local\)/],
      [{ routeTableBase: 0 }, /device index 0 would use table 0/],
      [{ routeTableBase: 2147483600 }, /routeTableBase: 2147483600 is unusable: tables .* leave/],
      [
        { pools: [{ name: "a", ipCooldownSeconds: 1e12 }] },
        /pools\[0\]\.ipCooldownSeconds: must be at most 3600; got 1000000000000/,
      ],
      [
        { pools: [{ name: "a", ipCooldownSeconds: 3601 }] },
        /ipCooldownSeconds: must be at most 3600/,
      ],
      [{ releaseDelaySeconds: 1e12 }, /releaseDelaySeconds: must be at most 86400/],
      [{ leakedEniGraceSeconds: 1e12 }, /leakedEniGraceSeconds: must be at most 604800/],
      [{ ec2ResyncSeconds: 1e12 }, /ec2ResyncSeconds: must be at most 86400/],
      [{ imdsCheckSeconds: 1e12 }, /imdsCheckSeconds: must be at most 3600/],
      [{ reconcileIntervalSeconds: 1e12 }, /reconcileIntervalSeconds: must be at most 300/],
      [{ reconcileIntervalSeconds: 1e-9 }, /reconcileIntervalSeconds: must be at least 0\.05/],
    ];
    for (const [knobs, want] of cases) {
      const path = `${root}/bad.yaml`;
      await Deno.writeTextFile(path, stringify({ ...base, ...knobs }));
      const r = await serve(["--config", path]);
      assert.equal(r.code, 2, `${JSON.stringify(knobs)}\n${r.stderr}`);
      assert.match(r.stderr, want, JSON.stringify(knobs));
      assert.match(r.stderr, /did not start/);
      assert.deepEqual(names(root), ["bad.yaml"], `${JSON.stringify(knobs)}: nothing created`);
    }
    for (
      const knobs of [
        { routeTableBase: 189 },
        { routeTableBase: 256 },
        { routeTableBase: 1 },
        { pools: [{ name: "a", ipCooldownSeconds: 3600 }] },
      ]
    ) {
      const path = `${root}/good.yaml`;
      await Deno.writeTextFile(path, stringify({ ...base, ...knobs }));
      const r = await serve(["--config", path, "--check-config"]);
      assert.equal(r.code, 0, `${JSON.stringify(knobs)} is accepted\n${r.stderr}`);
    }
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("socketPath: a file, directory, symlink or live socket is refused untouched; a stale socket is replaced", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  const root = await tempRoot();
  try {
    const sock = `${root}/ipam.sock`;
    const port = randomPort();
    const config = await writeChildConfig(root, sim, port, {});
    const cases: [string, () => Promise<void>, RegExp, () => Promise<void>][] = [
      [
        "regular file",
        () => Deno.writeTextFile(sock, "keep me\n"),
        /socketPath .*\/ipam\.sock: is a regular file, not a socket; the daemon will not replace it\. Set socketPath \(--socket, VPCNI_SOCKET\) to another path/,
        async () => assert.equal(await Deno.readTextFile(sock), "keep me\n"),
      ],
      [
        "directory",
        () => Deno.mkdir(`${sock}/inside`, { recursive: true }),
        /socketPath .*: is a directory, not a socket/,
        () => Promise.resolve(assert.deepEqual(names(sock), ["inside"])),
      ],
      [
        "symlink",
        () => Deno.symlink(`${root}/config.yaml`, sock),
        /socketPath .*: is a symlink; the daemon will not replace it/,
        async () => assert.equal(await Deno.readLink(sock), `${root}/config.yaml`),
      ],
    ];
    for (const [what, plant, want, intact] of cases) {
      await plant();
      const r = await serve(["--config", config]);
      assert.equal(r.code, 2, `${what}: ${r.stderr}`);
      assert.match(said(r.stderr), want, what);
      await intact();
      assert.equal(await exists(`${root}/state`), false, `${what}: no state dir created`);
      assert.deepEqual(
        names(root).filter((n) => n.startsWith(".")),
        [],
        `${what}: no private bind dir left`,
      );
      await Deno.remove(sock, { recursive: true });
    }

    // A path the kernel cannot bind a unix socket at is named before anything is created.
    const long = `${root}/${"d".repeat(100)}/ipam.sock`;
    const tooLong = await serve(["--config", config, "--socket", long]);
    assert.equal(tooLong.code, 2, tooLong.stderr);
    assert.match(said(tooLong.stderr), /socketPath .*: too long for a unix socket/);
    assert.equal(await exists(`${root}/state`), false);

    // A socket something answers on (here a listener of this test) is not taken over.
    const listener = Deno.listen({ transport: "unix", path: sock });
    try {
      const r = await serve(["--config", config]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(said(r.stderr), /socketPath .*: another process .* answers on this socket/);
      const c = await Deno.connect({ transport: "unix", path: sock });
      c.close();
    } finally {
      listener.close();
    }

    // A stale socket (its process died without removing it) is replaced.
    const stale = await new Deno.Command("python3", {
      args: ["-c", "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", sock],
    }).output();
    assert.ok(stale.success);
    assert.ok((await Deno.lstat(sock)).isSocket);
    const d = spawnDaemon(root, config, port);
    try {
      await d.ready();
      const st = await Deno.lstat(sock);
      assert.ok(st.isSocket);
      assert.equal(st.mode! & 0o777, 0o600);
      assert.ok((await ipamClient(sock).call({ op: "status" })).ok, "the daemon answers there");
    } finally {
      await d.stop();
    }
  } finally {
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});

Deno.test("empty or broken config file, unreachable IMDS, unusable stateDir: named, with the fix, nothing created", async () => {
  const root = await tempRoot();
  try {
    const base = { socketPath: `${root}/ipam.sock`, stateDir: `${root}/state` };
    const refuse = async (
      what: string,
      args: string[],
      code: number,
      want: RegExp,
      wrap: string[] = [],
    ) => {
      const r = await serve(args, 60_000, wrap);
      assert.equal(r.code, code, `${what}: ${r.stderr}`);
      assert.match(said(r.stderr), want, what);
      assert.equal(await exists(`${root}/ipam.sock`), false, `${what}: no socket`);
      assert.equal(await exists(`${root}/state`), false, `${what}: no state dir`);
    };
    await Deno.writeTextFile(`${root}/empty.yaml`, "");
    await refuse(
      "empty file",
      ["--config", `${root}/empty.yaml`],
      2,
      /^vpcni serve: --config .*\/empty\.yaml: is empty, no knobs; write the knobs to set .* or leave --config out/,
    );
    await Deno.writeTextFile(`${root}/comments.yaml`, "# pools: []\n\n");
    await refuse(
      "comments only",
      ["--config", `${root}/comments.yaml`],
      2,
      /--config .*\/comments\.yaml: holds only comments, no knobs/,
    );
    await Deno.writeTextFile(`${root}/syntax.yaml`, `socketPath: ${base.socketPath}\npools: [\n`);
    await refuse(
      "YAML syntax error",
      ["--config", `${root}/syntax.yaml`],
      2,
      new RegExp(`^vpcni serve: ${root}/syntax\\.yaml:3:1: not valid YAML/JSON: \\S`),
    );
    const fifo = `${root}/fifo.yaml`;
    assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
    await refuse(
      "FIFO as config",
      ["--config", fifo],
      2,
      /--config .*\/fifo\.yaml: not a regular file \(a FIFO, socket or device\)/,
    );

    // Nothing listens on this loopback port: IMDS refuses every connection.
    const good = `${root}/good.yaml`;
    const imds = `http://127.0.0.1:${randomPort()}`;
    await Deno.writeTextFile(
      good,
      stringify({ ...base, imdsEndpoint: imds, listen: "127.0.0.1:0" }),
    );
    await refuse(
      "unreachable IMDS",
      ["--config", good],
      1,
      new RegExp(
        `^vpcni serve: imdsEndpoint ${imds}: instance metadata did not answer .*hop-limit 2.*` +
          `set imdsEndpoint \\(--imds-endpoint, AWS_EC2_METADATA_SERVICE_ENDPOINT\\)`,
      ),
    );

    // A file where the state dir should be.
    await Deno.writeTextFile(`${root}/statefile`, "mine\n");
    const r = await serve(["--config", good, "--state-dir", `${root}/statefile`]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(
      said(r.stderr),
      /^vpcni serve: stateDir .*\/statefile: is a regular file, not a directory; .*set stateDir \(--state-dir, VPCNI_STATE_DIR\) to a directory/,
    );
    assert.equal(await Deno.readTextFile(`${root}/statefile`), "mine\n");
    assert.equal(await exists(`${root}/ipam.sock`), false);

    // A state dir on a read-only mount (in a mount namespace of the daemon's own).
    await Deno.mkdir(`${root}/ro`);
    const ro = await serve(
      ["--config", good, "--state-dir", `${root}/ro/state`],
      60_000,
      [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        `mount --bind -o ro "$0" "$0" && exec "$@"`,
        `${root}/ro`,
      ],
    );
    assert.equal(ro.code, 2, ro.stderr);
    assert.match(
      said(ro.stderr),
      /^vpcni serve: stateDir .*\/ro\/state: cannot create it: .*; run the daemon as root or set stateDir \(--state-dir\) to a writable directory/,
    );
    assert.deepEqual(names(`${root}/ro`), []);
    assert.equal(await exists(`${root}/ipam.sock`), false);
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
});
