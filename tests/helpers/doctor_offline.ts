/**
 * Doctor's options for a node whose daemon is down: a fresh state directory and a daemon
 * URL (also used for IMDS) on a loopback port nothing listens on, so every request is
 * refused at once.
 *
 * @module
 */
import type { DoctorOptions } from "../../doctor/facts.ts";

/**
 * Runs `fn` with doctor's options for a daemon-down node (state, conflist, binaries and
 * kubelet config all in the temporary directory `dir`, none of them present but the
 * directory); removes the directory afterwards.
 */
export async function withDaemonDown(
  prefix: string,
  fn: (o: DoctorOptions, dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix });
  const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (dead.addr as Deno.NetAddr).port;
  dead.close();
  try {
    await fn({
      daemonUrl: `http://127.0.0.1:${port}`,
      stateDir: dir,
      conflistFile: `${dir}/none.conflist`,
      binDir: dir,
      imdsEndpoint: `http://127.0.0.1:${port}`,
      kubeletConfig: `${dir}/none.yaml`,
      timeoutMs: 200,
    }, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
