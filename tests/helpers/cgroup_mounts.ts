/**
 * The machine's cgroup hierarchies, where tests make and remove the cgroups of their pods.
 *
 * @module
 */

/** Mount points of the cgroup hierarchies (each v1 controller's and the v2 unified one). */
export async function cgroupHierarchies(): Promise<string[]> {
  const info = await Deno.readTextFile("/proc/self/mountinfo");
  return info.split("\n").filter((l) => / - cgroup2? /.test(l)).map((l) => l.split(" ")[4]);
}
