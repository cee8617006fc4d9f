/**
 * A writer for the "newc" cpio format, the one the Linux kernel unpacks as an initramfs.
 * Written here so the kernel lane needs no host `cpio` binary.
 *
 * @module
 */

/** One entry of an initramfs archive. Parent directories must come before their children. */
export type CpioEntry =
  | { kind: "dir"; path: string; mode?: number }
  | { kind: "file"; path: string; data: Uint8Array; mode?: number }
  | { kind: "symlink"; path: string; target: string }
  | { kind: "chardev"; path: string; major: number; minor: number; mode?: number };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;
const HEADER_LEN = 110;
const encoder = new TextEncoder();

function hex8(n: number): string {
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) {
    throw new RangeError(`cpio field out of range: ${n}`);
  }
  return n.toString(16).padStart(8, "0");
}

function pad4(n: number): number {
  return (4 - (n % 4)) % 4;
}

function header(fields: {
  ino: number;
  mode: number;
  nlink: number;
  size: number;
  rdevMajor: number;
  rdevMinor: number;
  nameSize: number;
}): string {
  return "070701" + [
    fields.ino,
    fields.mode,
    0, // uid: root
    0, // gid: root
    fields.nlink,
    0, // mtime: fixed, so the same inputs make the same archive
    fields.size,
    0, // devmajor
    0, // devminor
    fields.rdevMajor,
    fields.rdevMinor,
    fields.nameSize,
    0, // check: unused by newc
  ].map(hex8).join("");
}

function describe(entry: CpioEntry): { mode: number; data: Uint8Array; rdev: [number, number] } {
  switch (entry.kind) {
    case "dir":
      return { mode: S_IFDIR | (entry.mode ?? 0o755), data: new Uint8Array(), rdev: [0, 0] };
    case "file":
      return { mode: S_IFREG | (entry.mode ?? 0o644), data: entry.data, rdev: [0, 0] };
    case "symlink":
      return { mode: S_IFLNK | 0o777, data: encoder.encode(entry.target), rdev: [0, 0] };
    case "chardev":
      return {
        mode: S_IFCHR | (entry.mode ?? 0o600),
        data: new Uint8Array(),
        rdev: [entry.major, entry.minor],
      };
  }
}

/** Serialises entries (paths relative to the archive root, no leading slash) into newc cpio. */
export function writeCpio(entries: CpioEntry[]): Uint8Array {
  const chunks: Uint8Array[] = [];
  let offset = 0;
  const push = (bytes: Uint8Array) => {
    chunks.push(bytes);
    offset += bytes.length;
  };
  const pushPadding = () => push(new Uint8Array(pad4(offset)));

  const all: CpioEntry[] = [...entries, {
    kind: "file",
    path: "TRAILER!!!",
    data: new Uint8Array(),
  }];
  all.forEach((entry, i) => {
    if (entry.path.startsWith("/") || entry.path === "") {
      throw new Error(`cpio path must be relative and non-empty: '${entry.path}'`);
    }
    const isTrailer = i === all.length - 1;
    const { mode, data, rdev } = describe(entry);
    const name = encoder.encode(entry.path + "\0");
    push(encoder.encode(header({
      ino: isTrailer ? 0 : i + 1,
      mode: isTrailer ? 0 : mode,
      nlink: entry.kind === "dir" ? 2 : 1,
      size: data.length,
      rdevMajor: rdev[0],
      rdevMinor: rdev[1],
      nameSize: name.length,
    })));
    push(name);
    pushPadding();
    push(data);
    pushPadding();
  });

  const out = new Uint8Array(offset);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Length of a newc header, exported for tests that parse archives back. */
export const CPIO_HEADER_LEN = HEADER_LEN;
