/**
 * Whether a path exists, for tests that wait for a process or a file to come or go.
 *
 * @module
 */

/** True when `path` exists (following links); false when it does not or cannot be read. */
export function pathExists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}
