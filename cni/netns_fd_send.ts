/**
 * The plugin's side of handing a pod's netns to the daemon, for a runtime that mounted it
 * where the daemon's mount namespace does not reach (containerd's
 * `netns_mounts_under_state_dir`, a daemon in a container without that directory): the
 * plugin runs in the runtime's mount namespace, opens `CNI_NETNS` there and sends the open
 * file over the daemon's netns socket (`<daemonSocket>.netns`, ipam/netns_fds.ts); the
 * daemon answers a one-time token that the plugin sends with the invocation again.
 *
 * Loaded only when the daemon asked for it (cni/thin.ts): FFI costs start-up time.
 *
 * @module
 */
import {
  AF_UNIX,
  cString,
  EINTR,
  errno,
  libc,
  O_CLOEXEC,
  SO_RCVTIMEO,
  SO_SNDTIMEO,
  SOCK_CLOEXEC,
  SOCK_STREAM,
  sockaddrUn,
  SOL_SOCKET,
  strerror,
  SUN_PATH_MAX,
  timeval,
} from "../base/libc.ts";
import { sendFd } from "../base/scm_rights.ts";
import { CniError, ErrorCode } from "./errors.ts";

const O_PATH = 0o10000000;
const ENOENT = 2;
const ENOTDIR = 20;
/** What the daemon answers: 32 lower-case hex digits. */
const TOKEN = /^[0-9a-f]{32}$/;

/** The netns socket beside the daemon's socket at `daemonSocket`. */
export function netnsSocketOf(daemonSocket: string): string {
  return `${daemonSocket}.netns`;
}

/** What {@linkcode sendNetnsFd} did. */
export type SentNetns =
  /** The daemon holds the netns; send this token with the invocation. */
  | { token: string }
  /** Nothing is at `CNI_NETNS` in the runtime's mount namespace either. */
  | { gone: true }
  /**
   * It cannot be handed over: the CNI error to print. Data, not a thrown error: the thin
   * plugin and this module may be separate bundles, each with its own error class.
   */
  | { failed: { code: number; msg: string; details?: string } };

/** The error when the daemon's netns socket cannot take the netns: names cause and fix. */
export function unreachableNetnsError(netns: string, why: string): CniError {
  const dir = netns.slice(0, netns.lastIndexOf("/")) || "/";
  return new CniError(
    ErrorCode.INVALID_ENV,
    `the IPAM daemon's mount namespace does not reach CNI_NETNS ${netns}, and the plugin ` +
      `could not hand it over: ${why}`,
    `mount the runtime's netns directory (${dir}) into the daemon's container with ` +
      "mountPropagation: HostToContainer, or run plugin and daemon of the same release " +
      "(the daemon then takes the netns from the plugin)",
  );
}

/**
 * Opens `netns` here (`O_PATH`: no side effect, never blocks) and sends it over the netns
 * socket beside `daemonSocket`, each step bounded by `timeoutMs`; when it cannot, the error
 * names the cause and the fix.
 */
export function sendNetnsFd(daemonSocket: string, netns: string, timeoutMs: number): SentNetns {
  try {
    return handOver(daemonSocket, netns, timeoutMs);
  } catch (e) {
    if (e instanceof CniError) {
      return { failed: { code: e.code, msg: e.message, details: e.details } };
    }
    const msg = `handing CNI_NETNS ${netns} to the daemon failed: ${(e as Error).message}`;
    return { failed: { code: ErrorCode.INTERNAL, msg } };
  }
}

function handOver(daemonSocket: string, netns: string, timeoutMs: number): SentNetns {
  const c = libc();
  const nsFd = c.open(cString(netns), O_PATH | O_CLOEXEC, 0);
  if (nsFd < 0) {
    const code = errno();
    if (code === ENOENT || code === ENOTDIR) return { gone: true };
    throw new CniError(
      ErrorCode.INVALID_ENV,
      `CNI_NETNS ${JSON.stringify(netns)} cannot be opened: ${strerror(code)}`,
      "CNI_NETNS must name the pod's network namespace",
    );
  }
  const path = netnsSocketOf(daemonSocket);
  const sock = c.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  try {
    if (sock < 0) throw unreachableNetnsError(netns, `socket: ${strerror(errno())}`);
    const tv = timeval(timeoutMs);
    c.setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, tv, tv.length);
    c.setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, tv, tv.length);
    if (new TextEncoder().encode(path).length >= SUN_PATH_MAX) {
      throw unreachableNetnsError(netns, `${path} is too long a path`);
    }
    const sa = sockaddrUn(path);
    while (c.connect(sock, sa, sa.length) < 0) {
      const e = errno();
      if (e !== EINTR) throw unreachableNetnsError(netns, `connect ${path}: ${strerror(e)}`);
    }
    while (sendFd(sock, nsFd, 0x4e) < 0) {
      const e = errno();
      if (e !== EINTR) throw unreachableNetnsError(netns, `sendmsg ${path}: ${strerror(e)}`);
    }
    const buf = new Uint8Array(64);
    let got = 0;
    for (;;) {
      const n = Number(c.recv(sock, buf.subarray(got), BigInt(buf.length - got), 0));
      if (n < 0) {
        const e = errno();
        if (e === EINTR) continue;
        throw unreachableNetnsError(netns, `recv ${path}: ${strerror(e)}`);
      }
      if (n === 0 || (got += n) >= buf.length) break;
    }
    const token = new TextDecoder().decode(buf.subarray(0, got)).trim();
    if (!TOKEN.test(token)) {
      throw unreachableNetnsError(netns, `${path} answered no token`);
    }
    return { token };
  } finally {
    if (sock >= 0) c.close(sock);
    c.close(nsFd);
  }
}
