/**
 * The daemon's netns socket (`<socketPath>.netns`, 0600 like the main one): where the plugin
 * hands over a pod netns that the daemon's mount namespace does not reach
 * (cni/netns_fd_send.ts). A client connects, sends one byte with the open netns attached
 * (`SCM_RIGHTS`), and reads back a one-time token: 32 hex digits, then the connection closes.
 * The invocation it sends next names the token; the CNI service takes the descriptor for it
 * ({@linkcode NetnsFds.take}) and runs the verb through `/proc/self/fd/<n>` (descriptors are
 * the process's, so a CNI worker opens it too). A descriptor nobody takes is closed after
 * {@linkcode TOKEN_TTL_MS}.
 *
 * `accept` and `recvmsg` run on Deno's blocking thread pool (base/scm_rights.ts), so the
 * event loop never waits on a client; a client that sends nothing is dropped after
 * {@linkcode CLIENT_TIMEOUT_MS}.
 *
 * @module
 */
import {
  AF_UNIX,
  errno,
  libc,
  MSG_NOSIGNAL,
  SO_RCVTIMEO,
  SO_SNDTIMEO,
  SOCK_CLOEXEC,
  SOCK_STREAM,
  sockaddrUn,
  SOL_SOCKET,
  strerror,
  timeval,
} from "../base/libc.ts";
import { recvFd, scmLibc } from "../base/scm_rights.ts";
import { log } from "./log.ts";
import { prepareSocket } from "./unix_socket.ts";

/** How long a handed-over netns waits for the invocation that names its token. */
export const TOKEN_TTL_MS = 30_000;
/** How long a connected client may take to send its netns. */
export const CLIENT_TIMEOUT_MS = 5_000;

const SHUT_RDWR = 2;

/** The netns socket beside the daemon's socket at `socketPath`. */
export function netnsSocketPath(socketPath: string): string {
  return `${socketPath}.netns`;
}

/** Descriptors handed over and not yet taken. */
export interface NetnsFds {
  /** The descriptor for `token`, once: the caller closes it ({@linkcode closeFd}). */
  take(token: string): number | undefined;
  /** Stops listening, removes the socket and closes every descriptor not taken. */
  close(): Promise<void>;
}

/** Where {@linkcode serveNetnsFdsFor} hands the descriptors (ipam/cni_service.ts). */
export interface NetnsFdsUser {
  useNetnsFds(fds: NetnsFds | undefined, problem?: string): void;
}

/**
 * Serves the netns socket beside the daemon's socket at `socketPath` for `cni`. A daemon
 * without it still serves every pod whose netns it reaches; the others get an error that
 * says why (logged here too).
 */
export async function serveNetnsFdsFor(
  socketPath: string,
  cni: NetnsFdsUser,
): Promise<NetnsFds | undefined> {
  const at = netnsSocketPath(socketPath);
  try {
    const fds = await serveNetnsFds(at);
    cni.useNetnsFds(fds);
    return fds;
  } catch (e) {
    const problem = `its netns socket ${at} could not be set up: ${(e as Error).message}`;
    log.warn("pods whose netns the daemon cannot see will fail: {problem}", { problem });
    cni.useNetnsFds(undefined, problem);
    return undefined;
  }
}

/** Closes a descriptor taken from {@linkcode NetnsFds.take}. */
export function closeFd(fd: number): void {
  libc().close(fd);
}

function randomToken(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * Listens on `path`, created 0600 from its first moment (ipam/unix_socket.ts). Throws what
 * failed; the daemon then runs without it (and says so when a pod needs it).
 */
export async function serveNetnsFds(path: string): Promise<NetnsFds> {
  const c = libc();
  const place = await prepareSocket(path);
  const lfd = c.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) throw new Error(`socket: ${strerror(errno())}`);
  let sa: Uint8Array | undefined;
  try {
    sa = sockaddrUn(place.bindPath);
  } catch { /* too long a path: said below, with the same clean-up as a failed bind */ }
  if (!sa || c.bind(lfd, sa, sa.length) < 0 || scmLibc().listen(lfd, 64) < 0) {
    const why = sa ? strerror(errno()) : `${place.bindPath} is too long a socket path`;
    c.close(lfd);
    await place.moveIntoPlace(() => {}).catch(() => {});
    await Deno.remove(path).catch(() => {});
    throw new Error(`bind ${path}: ${why}`);
  }
  await place.moveIntoPlace(() => void c.close(lfd));

  const held = new Map<string, { fd: number; timer: ReturnType<typeof setTimeout> }>();
  let closing = false;

  const serveClient = async (conn: number) => {
    try {
      const tv = timeval(CLIENT_TIMEOUT_MS);
      c.setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, tv, tv.length);
      c.setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, tv, tv.length);
      const got = await recvFd(conn);
      if (!got) return;
      for (const extra of got.extra) c.close(extra);
      if (got.fd === undefined) return;
      if (closing) return void c.close(got.fd);
      const token = randomToken();
      const timer = setTimeout(() => {
        const h = held.get(token);
        if (!h) return;
        held.delete(token);
        c.close(h.fd);
        log.warn("a pod netns handed over was never used; closed it", {});
      }, TOKEN_TTL_MS);
      Deno.unrefTimer(timer);
      held.set(token, { fd: got.fd, timer });
      const out = new TextEncoder().encode(`${token}\n`);
      c.send(conn, out, BigInt(out.length), MSG_NOSIGNAL);
    } finally {
      c.close(conn);
    }
  };

  const loop = (async () => {
    while (!closing) {
      const conn = await scmLibc().accept4(lfd, null, null, SOCK_CLOEXEC);
      if (closing) {
        if (conn >= 0) c.close(conn);
        break;
      }
      if (conn < 0) {
        // errno is another thread's here (see base/scm_rights.ts): say only that it failed,
        // and do not spin on a lasting failure (out of descriptors).
        log.warn("the netns socket {path} failed to accept a client", { path });
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      serveClient(conn).catch((e) =>
        log.warn("a netns hand-over failed: {error}", { error: String(e) })
      );
    }
  })();

  return {
    take(token) {
      const h = held.get(token);
      if (!h) return undefined;
      held.delete(token);
      clearTimeout(h.timer);
      return h.fd;
    },
    async close() {
      if (closing) return;
      closing = true;
      // Wakes the accept waiting on Deno's thread pool; it returns and the loop ends.
      scmLibc().shutdown(lfd, SHUT_RDWR);
      await loop;
      c.close(lfd);
      await Deno.remove(path).catch(() => {});
      for (const h of held.values()) {
        clearTimeout(h.timer);
        c.close(h.fd);
      }
      held.clear();
    },
  };
}
