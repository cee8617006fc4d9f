/**
 * The daemon's unix socket, created with its final mode from the start. A socket bound with
 * `bind()` takes its mode from the umask, and a `chmod` after it leaves a gap in which another
 * user could connect. So the socket is bound inside a fresh 0700 directory next to its final
 * path (nobody else can reach into it), made 0600 there, and then renamed into place: at its
 * final path it is 0600 from its first moment.
 *
 * What is already at the path is looked at first: nothing, or a socket nobody answers on (a
 * killed daemon's), may be replaced; a socket a live daemon answers on, a regular file, a
 * directory, a symlink or anything else is refused, naming `socketPath`.
 *
 * @module
 */
import { ConfigError } from "./config.ts";

/** The longest unix socket path the kernel takes (sun_path less its terminating NUL). */
const MAX_SOCKET_PATH = 107;

/** How long the probe of an existing socket waits for an answer. */
const PROBE_MS = 2000;

function socketPathError(path: string, what: string): ConfigError {
  return ConfigError.file(
    `socketPath ${path}: ${what}. Set socketPath (--socket, VPCNI_SOCKET) to another path, ` +
      `or remove what is there if nothing needs it`,
  );
}

/** The directory of a socket path. */
function socketDir(path: string): string {
  return path.slice(0, path.lastIndexOf("/")) || "/";
}

/** True when something accepts connections on the unix socket at `path`. */
async function answers(path: string): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((r) => timer = setTimeout(() => r("timeout"), PROBE_MS));
  const attempt = Deno.connect({ transport: "unix", path }).then(
    (c) => (c.close(), true),
    () => false,
  );
  try {
    // A listener too busy to accept within the bound is alive all the same.
    return (await Promise.race([attempt, timeout])) !== false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Refuses a `socketPath` the daemon may not take; creates nothing. Accepts a missing path
 * and a stale socket (one nobody answers on).
 */
export async function checkSocketPath(path: string): Promise<void> {
  // A unix socket's path holds at most 107 bytes; the bind path is the longer one.
  const bindLength = new TextEncoder().encode(`${socketDir(path)}/.s-0123456789abcdef/s`).length;
  const finalLength = new TextEncoder().encode(path).length;
  if (Math.max(bindLength, finalLength) > MAX_SOCKET_PATH) {
    throw socketPathError(
      path,
      `too long for a unix socket (the daemon binds at a path of ${
        Math.max(bindLength, finalLength)
      } bytes beside it; the kernel takes ${MAX_SOCKET_PATH})`,
    );
  }
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw socketPathError(path, `cannot be looked at (${(e as Error).message})`);
  }
  if (info.isSymlink) throw socketPathError(path, "is a symlink; the daemon will not replace it");
  if (info.isDirectory) throw socketPathError(path, "is a directory, not a socket");
  if (info.isFile) {
    throw socketPathError(path, "is a regular file, not a socket; the daemon will not replace it");
  }
  if (!info.isSocket) {
    throw socketPathError(path, "is not a socket; the daemon will not replace it");
  }
  if (await answers(path)) {
    throw socketPathError(
      path,
      "another process (a running vpcni serve?) answers on this socket",
    );
  }
}

/** Where to bind a socket that {@linkcode prepareSocket} then moves into place. */
export interface SocketPlace {
  /** The path to bind at: `.s-XXXX/s`, inside a fresh 0700 directory beside the final path. */
  bindPath: string;
  /**
   * Makes the bound socket 0600 and renames it to the final path; on failure calls `close`
   * (the listener) and throws. The private directory goes either way.
   */
  moveIntoPlace(close: () => Promise<void> | void): Promise<void>;
}

/**
 * Checks `path` (see {@linkcode checkSocketPath}), creates its directory 0700 when missing
 * and a private 0700 directory beside it to bind in. Bind at `bindPath`, then call
 * `moveIntoPlace`: the socket is 0600 from its first moment at `path` (see the module doc).
 */
export async function prepareSocket(path: string): Promise<SocketPlace> {
  const dir = socketDir(path);
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  await checkSocketPath(path);
  const priv = await Deno.makeTempDir({ dir, prefix: ".s-" });
  // makeTempDir asks for 0700 already; the chmod makes it so whatever the umask.
  await Deno.chmod(priv, 0o700);
  const bindPath = `${priv}/s`; // short: a unix socket path has at most 107 bytes
  return {
    bindPath,
    async moveIntoPlace(close) {
      try {
        await Deno.chmod(bindPath, 0o600);
        await Deno.rename(bindPath, path);
      } catch (e) {
        await Promise.resolve(close()).catch(() => {});
        throw e;
      } finally {
        await Deno.remove(priv, { recursive: true }).catch(() => {});
      }
    },
  };
}
