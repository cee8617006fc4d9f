/**
 * Starts the AWS peers nobody here wrote — moto's EC2 server and amazon-ec2-metadata-mock —
 * on free loopback ports, for the aws/ client suites. Each returns a handle whose `close`
 * stops the process it started (by its own pid only).
 *
 * @module
 */
import { peerBin } from "./peers.ts";

/** A running peer process. */
export interface PeerProcess {
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  endpoint: string;
  port: number;
  close(): Promise<void>;
}

/** A loopback TCP port nobody listens on right now. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function waitForPort(port: number, child: Deno.ChildProcess, what: string, ms: number) {
  const deadline = Date.now() + ms;
  let exited: Deno.CommandStatus | undefined;
  child.status.then((s) => (exited = s));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${what} exited with code ${exited.code} before listening`);
    try {
      const c = await Deno.connect({ hostname: "127.0.0.1", port });
      c.close();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  throw new Error(`${what} did not listen on 127.0.0.1:${port} within ${ms} ms`);
}

function handle(child: Deno.ChildProcess, port: number): PeerProcess {
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    async close() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
    },
  };
}

/** Finds `moto_server` on PATH, or fails saying how to install it. */
export function motoServerBin(): string {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (Deno.statSync(`${dir}/moto_server`).isFile) return `${dir}/moto_server`;
    } catch { /* not here */ }
  }
  throw new Error(`moto_server is not on PATH: install it with pip install "moto[server]"`);
}

/** Starts moto's server (`moto_server -H 127.0.0.1 -p PORT`) on a free port. */
export async function startMoto(): Promise<PeerProcess> {
  const port = freePort();
  const child = new Deno.Command(motoServerBin(), {
    args: ["-H", "127.0.0.1", "-p", String(port)],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    await waitForPort(port, child, "moto_server", 20_000);
  } catch (e) {
    await handle(child, port).close();
    throw e;
  }
  return handle(child, port);
}

/**
 * Starts amazon-ec2-metadata-mock on a free port. `imdsv2Only` makes it refuse requests
 * without a session token; `config` (written to a temp file) overrides its metadata values;
 * `port` reuses a port (to restart the mock in place).
 */
export async function startMetadataMock(
  o: { imdsv2Only?: boolean; config?: unknown; port?: number } = {},
): Promise<PeerProcess> {
  const bin = peerBin("ec2-metadata-mock");
  const port = o.port ?? freePort();
  const args = ["-n", "127.0.0.1", "-p", String(port)];
  if (o.imdsv2Only) args.push("-I");
  let cfgFile: string | undefined;
  if (o.config) {
    cfgFile = await Deno.makeTempFile({ prefix: "vpcni-aemm-", suffix: ".json" });
    await Deno.writeTextFile(cfgFile, JSON.stringify(o.config));
    args.push("-c", cfgFile);
  }
  const home = await Deno.makeTempDir({ prefix: "vpcni-aemm-home-" });
  const child = new Deno.Command(bin, {
    args,
    env: { HOME: home },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const h = handle(child, port);
  const cleanup = async () => {
    await h.close();
    if (cfgFile) await Deno.remove(cfgFile).catch(() => {});
    await Deno.remove(home, { recursive: true }).catch(() => {});
  };
  try {
    await waitForPort(port, child, "ec2-metadata-mock", 10_000);
  } catch (e) {
    await cleanup();
    throw e;
  }
  return { ...h, close: cleanup };
}

/** A loopback TCP server that accepts connections and never answers (for timeout tests). */
export function startSilentServer(): PeerProcess {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  const conns: Deno.Conn[] = [];
  const loop = (async () => {
    try {
      for await (const c of l) conns.push(c);
    } catch { /* listener closed */ }
  })();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    async close() {
      l.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await loop;
    },
  };
}

/** A loopback port `p` such that `p` and the next `count - 1` ports are free right now. */
export function freePortRun(count: number): number {
  for (let tries = 0; tries < 50; tries++) {
    const p = freePort();
    const held: Deno.Listener[] = [];
    try {
      for (let i = 1; i < count; i++) {
        held.push(Deno.listen({ hostname: "127.0.0.1", port: p + i }));
      }
      return p;
    } catch {
      // one of the following ports is taken: try another start
    } finally {
      for (const l of held) l.close();
    }
  }
  throw new Error(`no run of ${count} free loopback ports found`);
}
