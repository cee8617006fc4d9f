/**
 * Making a write durable: after a file is written and renamed into place, its data and the
 * directory entry are flushed so that a crash leaves either the old file or the new one.
 *
 * @module
 */

/**
 * Flushes the file or directory at `path` to disk, as far as the filesystem allows. Some
 * filesystems refuse fsync on a directory; that error is passed over, since the rename it
 * follows is atomic regardless.
 */
export async function fsyncPath(path: string): Promise<void> {
  try {
    const f = await Deno.open(path, { read: true });
    try {
      await f.sync();
    } finally {
      f.close();
    }
  } catch {
    // refused (a directory on some filesystems): the rename is atomic regardless
  }
}
