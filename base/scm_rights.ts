/**
 * One file descriptor over a unix stream socket (`SCM_RIGHTS`), through libc via Deno FFI:
 * Deno's own unix sockets cannot carry descriptors. The plugin sends a pod's netns this way
 * when the daemon's mount namespace does not reach it (cni/netns_fd_send.ts); the daemon
 * receives it (ipam/netns_fds.ts).
 *
 * The symbols are bound on first use, apart from base/libc.ts's groups: only those two
 * rare paths need them. The daemon's `accept4` and `recvmsg` are `nonblocking` (Deno runs
 * them on a thread of its own and answers a promise), so a peer that connects and sends
 * nothing never stalls the daemon's event loop; errno is not read after them (it belongs
 * to that other thread).
 *
 * Layouts are the LP64 ones (x86-64, arm64): `struct msghdr` is 56 bytes, `struct iovec`
 * 16, and a control message with one `int` takes `CMSG_SPACE(4)` = 24 bytes.
 *
 * @module
 */
import { MSG_NOSIGNAL, SOL_SOCKET } from "./libc.ts";

const SYMBOLS = {
  sendmsg: { parameters: ["i32", "buffer", "i32"], result: "isize" },
  recvmsg: { parameters: ["i32", "buffer", "i32"], result: "isize", nonblocking: true },
  accept4: { parameters: ["i32", "pointer", "pointer", "i32"], result: "i32", nonblocking: true },
  listen: { parameters: ["i32", "i32"], result: "i32" },
  shutdown: { parameters: ["i32", "i32"], result: "i32" },
} as const;

let bound: Deno.DynamicLibrary<typeof SYMBOLS>["symbols"] | undefined;

/** The symbols above, bound the first time. */
export function scmLibc(): Deno.DynamicLibrary<typeof SYMBOLS>["symbols"] {
  return bound ??= Deno.dlopen("libc.so.6", SYMBOLS).symbols;
}

const SCM_RIGHTS = 1;
/** `MSG_CMSG_CLOEXEC`: a received descriptor is close-on-exec from its first moment. */
export const MSG_CMSG_CLOEXEC = 0x40000000;
/** `MSG_CTRUNC` in `msg_flags`: control data was cut (more descriptors than room). */
const MSG_CTRUNC = 0x8;
/** `CMSG_LEN(4)`: a header of 16 bytes and one `int`. */
const CMSG_LEN_ONE_FD = 20;
/** `CMSG_SPACE(4)` with room for a few more, so extra descriptors are seen and closed. */
const CONTROL_BYTES = 64;
const MSGHDR_BYTES = 56;

/** Touches buffers after a call that reached them only through addresses in a header. */
function keepAlive(...bufs: Uint8Array[]): void {
  for (const b of bufs) if (b.byteLength < 0) throw new Error("unreachable");
}

function ptr(buf: Uint8Array): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf as Uint8Array<ArrayBuffer>)));
}

/**
 * A `struct msghdr` with one iovec over `data` and a control buffer. The caller keeps
 * `iov` referenced until the call returns: the header holds only its address.
 */
function msghdr(data: Uint8Array, control: Uint8Array, controlLen: number) {
  const iov = new Uint8Array(16);
  const iv = new DataView(iov.buffer);
  iv.setBigUint64(0, ptr(data), true);
  iv.setBigUint64(8, BigInt(data.length), true);
  const hdr = new Uint8Array(MSGHDR_BYTES);
  const h = new DataView(hdr.buffer);
  h.setBigUint64(16, ptr(iov), true); // msg_iov
  h.setBigUint64(24, 1n, true); // msg_iovlen
  h.setBigUint64(32, ptr(control), true); // msg_control
  h.setBigUint64(40, BigInt(controlLen), true); // msg_controllen
  return { hdr, iov };
}

/**
 * Sends one byte, `tag`, with the descriptor `fd` attached. Returns the bytes sent (1), or
 * -1 with errno set (read it at once).
 */
export function sendFd(sock: number, fd: number, tag: number, flags = MSG_NOSIGNAL): number {
  const data = new Uint8Array([tag]);
  const control = new Uint8Array(24);
  const c = new DataView(control.buffer);
  c.setBigUint64(0, BigInt(CMSG_LEN_ONE_FD), true);
  c.setInt32(8, SOL_SOCKET, true);
  c.setInt32(12, SCM_RIGHTS, true);
  c.setInt32(16, fd, true);
  const { hdr, iov } = msghdr(data, control, control.length);
  const n = Number(scmLibc().sendmsg(sock, hdr, flags));
  keepAlive(iov, data, control);
  return n;
}

/** What {@linkcode recvFd} got. */
export interface ReceivedFd {
  /** Bytes of data read: 0 when the peer closed without sending. */
  bytes: number;
  /** The first descriptor that came, if any (close-on-exec). */
  fd?: number;
  /** Any further descriptors that came: the caller closes them. */
  extra: number[];
  /** Control data was cut: descriptors beyond the room were lost (and closed by the kernel). */
  truncated: boolean;
}

/**
 * Receives up to 16 bytes and the descriptors sent with them, on Deno's blocking thread pool
 * (see the module doc). Undefined when `recvmsg` failed (a timeout, a reset).
 */
export async function recvFd(sock: number): Promise<ReceivedFd | undefined> {
  const data = new Uint8Array(16);
  const control = new Uint8Array(CONTROL_BYTES);
  const { hdr, iov } = msghdr(data, control, control.length);
  const n = Number(await scmLibc().recvmsg(sock, hdr, MSG_CMSG_CLOEXEC));
  keepAlive(iov, data, control);
  if (n < 0) return undefined;
  const h = new DataView(hdr.buffer);
  const controlLen = Number(h.getBigUint64(40, true));
  const flags = h.getInt32(48, true);
  const fds: number[] = [];
  const c = new DataView(control.buffer);
  for (let off = 0; off + 16 <= controlLen;) {
    const len = Number(c.getBigUint64(off, true));
    if (len < 16) break;
    if (c.getInt32(off + 8, true) === SOL_SOCKET && c.getInt32(off + 12, true) === SCM_RIGHTS) {
      for (let p = off + 16; p + 4 <= off + len && p + 4 <= controlLen; p += 4) {
        fds.push(c.getInt32(p, true));
      }
    }
    off += (len + 7) & ~7;
  }
  return { bytes: n, fd: fds[0], extra: fds.slice(1), truncated: (flags & MSG_CTRUNC) !== 0 };
}
