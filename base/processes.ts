/**
 * The processes of this PID namespace and their command lines, read from /proc: for finding
 * a daemon by the name it was started with and reading its flags.
 *
 * @module
 */

/** One process: its PID and its command line split into arguments. */
export interface ProcessArgv {
  pid: number;
  /** `argv[0]` is the program as it was started (a path or a bare name). */
  argv: string[];
}

/**
 * Yields each process whose command line can be read. A process that exits while /proc is
 * walked, or whose cmdline cannot be read, is passed over; a missing /proc throws.
 */
export async function* processArgvs(): AsyncGenerator<ProcessArgv> {
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    let argv: string[];
    try {
      argv = (await Deno.readTextFile(`/proc/${e.name}/cmdline`)).split("\0");
    } catch {
      continue;
    }
    yield { pid: Number(e.name), argv };
  }
}
