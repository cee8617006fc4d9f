/**
 * Named network namespaces for tests, created with iproute2 and always removed.
 *
 * @module
 */
import { sh } from "./sh.ts";

/** A netns the test created; `path` is what the product code opens. */
export interface TestNetns {
  name: string;
  path: string;
}

let counter = 0;

/** Makes a unique, short netns name from a prefix (the prefix says which suite owns it). */
export function uniqueName(prefix: string): string {
  counter++;
  return `${prefix}${Deno.pid % 100000}-${counter}`;
}

/** Creates a named netns with loopback up. */
export async function createNetns(name: string): Promise<TestNetns> {
  await sh(["ip", "netns", "add", name]);
  await sh(["ip", "link", "set", "lo", "up"], { netns: name });
  return { name, path: `/run/netns/${name}` };
}

/** Deletes a named netns; a missing one is fine. */
export async function deleteNetns(name: string): Promise<void> {
  const r = await new Deno.Command("ip", { args: ["netns", "del", name], stderr: "null" })
    .output();
  void r;
}

/**
 * Runs `fn` with fresh netns named from `prefix`, and deletes them afterwards even when
 * `fn` throws.
 */
export async function withNetns<T>(
  prefixes: string[],
  fn: (...ns: TestNetns[]) => Promise<T>,
): Promise<T> {
  const made: TestNetns[] = [];
  try {
    for (const p of prefixes) made.push(await createNetns(uniqueName(p)));
    return await fn(...made);
  } finally {
    for (const ns of made) await deleteNetns(ns.name);
  }
}

/** True when running as root, which every kernel test needs. */
export function isRoot(): boolean {
  return Deno.uid() === 0;
}
