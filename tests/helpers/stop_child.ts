/**
 * Stopping a child process the tests started, without hanging on one that ignores SIGTERM.
 *
 * @module
 */

/**
 * Sends `p` SIGTERM, then SIGKILL if it has not exited within `graceMs`; resolves once it
 * has exited. A child that is already gone is fine.
 */
export async function stopChild(p: Deno.ChildProcess, graceMs = 10_000): Promise<void> {
  try {
    p.kill("SIGTERM");
  } catch { /* already gone */ }
  const done = await Promise.race([
    p.status.then(() => true),
    new Promise<false>((res) => setTimeout(() => res(false), graceMs)),
  ]);
  if (!done) {
    try {
      p.kill("SIGKILL");
    } catch { /* gone meanwhile */ }
    await p.status;
  }
}
