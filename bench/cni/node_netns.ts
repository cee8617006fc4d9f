/**
 * What both CNI benches do first: a node netns of their own holding a primary "ENI" (a veth
 * with the MAC the stand-in daemon reports), the bench script run again inside it, its last
 * line of output parsed as JSON, and the netns removed whatever happens.
 *
 * @module
 */

const decoder = new TextDecoder();

/** Runs `cmd` and returns its stdout; throws with its stderr when it fails. */
export async function sh(cmd: string[], env?: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    stdout: "piped",
    stderr: "piped",
    env,
  }).output();
  if (!out.success) throw new Error(`${cmd.join(" ")}: ${decoder.decode(out.stderr)}`);
  return decoder.decode(out.stdout);
}

/** The 1-minute load average, as /proc/loadavg prints it. */
export async function loadAverage(): Promise<string> {
  return (await Deno.readTextFile("/proc/loadavg")).split(" ")[0];
}

/**
 * Creates netns `node` with `lo` and an `eth0` veth of MAC `eniMac` up, runs `script` there
 * under `deno run -A --no-check` with `--inner` and `args`, and returns its last output line
 * parsed as JSON. The netns is deleted afterwards.
 */
export async function runInNodeNetns<T>(
  node: string,
  eniMac: string,
  script: string,
  args: string[],
): Promise<T> {
  await sh(["ip", "netns", "add", node]);
  try {
    await sh(["ip", "-n", node, "link", "set", "lo", "up"]);
    await sh(["ip", "-n", node, "link", "add", "eth0", "address", eniMac, "type", "veth"].concat(
      ["peer", "name", "eth0p"],
    ));
    for (const l of ["eth0", "eth0p"]) await sh(["ip", "-n", node, "link", "set", l, "up"]);
    const out = await sh(
      ["ip", "netns", "exec", node, "deno", "run", "-A", "--no-check", script, "--inner", ...args],
    );
    return JSON.parse(out.trim().split("\n").pop()!) as T;
  } finally {
    await sh(["ip", "netns", "del", node]).catch(() => {});
  }
}
