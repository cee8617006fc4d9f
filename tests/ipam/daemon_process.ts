/**
 * Runs `vpcni serve` (main.ts) as a child process against a simulator, for tests that kill
 * it with SIGKILL and for the benchmark that measures its RSS.
 *
 * @module
 */
import { stringify } from "yaml";
import type { SimServer } from "../../aws/sim/mod.ts";
import { INSTANCE } from "./harness.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/** A daemon child process. */
export interface DaemonProcess {
  child: Deno.ChildProcess;
  port: number;
  /** Waits until /readyz answers 200 (throws with the log tail after `ms`). */
  ready(ms?: number): Promise<void>;
  /** SIGKILL and reap. */
  kill9(): Promise<void>;
  /** SIGTERM and reap; returns the exit code. */
  stop(): Promise<number>;
  /** Resident set size in KiB from /proc. */
  rssKib(): number;
}

/** Writes the daemon config for a child run and returns its path. */
export async function writeChildConfig(
  root: string,
  sim: SimServer,
  port: number,
  extra: Record<string, unknown>,
): Promise<string> {
  const path = `${root}/config.yaml`;
  await Deno.writeTextFile(
    path,
    stringify({
      clusterName: "test-cluster",
      socketPath: `${root}/ipam.sock`,
      stateDir: `${root}/state`,
      listen: `127.0.0.1:${port}`,
      ec2Endpoint: sim.ec2Endpoint,
      imdsEndpoint: sim.imdsEndpointFor(INSTANCE),
      reconcileIntervalSeconds: 0.2,
      leakedEniGraceSeconds: 0,
      startJitterSeconds: 0,
      ec2ResyncSeconds: 1,
      logLevel: "info",
      // A kubelet on the test machine must not see these daemons.
      devicePlugin: "off",
      ...extra,
    }),
  );
  return path;
}

/**
 * Starts `vpcni serve --config <path>`; stderr goes to `<root>/daemon.log`. `wrapper` is a
 * command that ends by exec'ing its arguments (e.g. `unshare …`): the daemon then runs with
 * the child's pid.
 */
export function spawnDaemon(
  root: string,
  configPath: string,
  port: number,
  env: Record<string, string> = {},
  wrapper: string[] = [],
): DaemonProcess {
  const log = Deno.openSync(`${root}/daemon.log`, { append: true, create: true });
  const argv = [
    ...wrapper,
    Deno.execPath(),
    ...["run", "-A", "--no-check", MAIN, "serve", "--config", configPath],
  ];
  const child = new Deno.Command(argv[0], {
    args: argv.slice(1),
    env: { AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test", ...env },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const pump = child.stderr.pipeTo(
    new WritableStream({ write: (c) => void log.writeSync(c) }),
  ).catch(() => {}).finally(() => log.close());
  let reaped: Promise<Deno.CommandStatus> | undefined;
  const reap = () => reaped ??= child.status.then(async (s) => (await pump, s));
  return {
    child,
    port,
    async ready(ms = 30_000) {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
          async (r) => (await r.body?.cancel(), r.ok),
          () => false,
        );
        if (ok) return;
        const exited = await Promise.race([
          child.status.then(() => true),
          new Promise<boolean>((r) => setTimeout(() => r(false), 100)),
        ]);
        if (exited) break;
      }
      const tail = (await Deno.readTextFile(`${root}/daemon.log`).catch(() => "")).slice(-3000);
      throw new Error(`daemon not ready on port ${port}; log tail:\n${tail}`);
    },
    async kill9() {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
      await reap();
    },
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      return (await reap()).code;
    },
    rssKib() {
      const status = Deno.readTextFileSync(`/proc/${child.pid}/status`);
      return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    },
  };
}

/** A free-looking loopback port for introspection. */
export function randomPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}
