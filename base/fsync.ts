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

/**
 * Writes `bytes` to `path` so that a crash leaves the old file or the new one, never a part:
 * a temp file in the same directory (same filesystem), every byte written and fsynced, `mode`
 * set, renamed over `path`, then the directory flushed. When any step fails the temp file is
 * removed and the old file is untouched. The temp file is named after `path` and this process
 * (so two writers never share one) unless `tmpName` is given: a writer that holds a lock can
 * reuse one name, so a crash never leaves more than one temp file behind.
 */
export async function writeFileAtomic(
  path: string,
  bytes: Uint8Array,
  mode: number,
  tmpName?: string,
): Promise<void> {
  const dir = path.replace(/\/[^/]*$/, "") || "/";
  const tmp = `${dir}/${tmpName ?? `.${path.slice(dir.length + 1)}.tmp-${Deno.pid}`}`;
  const f = await Deno.open(tmp, { write: true, create: true, truncate: true, mode });
  try {
    // A write may take fewer bytes than it was given; a short file must never be renamed in.
    for (let done = 0; done < bytes.length;) done += await f.write(bytes.subarray(done));
    await f.sync();
  } catch (e) {
    f.close();
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
  f.close();
  try {
    await Deno.chmod(tmp, mode);
    await Deno.rename(tmp, path);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
  await fsyncPath(dir);
}
