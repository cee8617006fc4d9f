/**
 * Whether a path exists, for code that reads a missing file or netns as an answer rather
 * than an error.
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
