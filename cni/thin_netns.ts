/**
 * The thin plugin's part in a pod netns the daemon's mount namespace does not reach
 * (cni/thin.ts): handing it over when the daemon asks, and saying what happened when a daemon
 * from before the hand-over refuses it. What needs FFI is the full plugin's
 * (cni/netns_fd_send.ts), loaded only then; this module loads nothing.
 *
 * @module
 */
import { CniError, ErrorCode } from "./errors.ts";
import type { FullPlugin } from "./thin.ts";

/**
 * Hands `netns` to the daemon at `socket` through the full plugin: the token to send with the
 * invocation, or, for a DEL whose netns is gone in the runtime's namespace too, that the
 * invocation goes without `CNI_NETNS` (the node's side is cleaned up, as for any DEL of a gone
 * netns). An ADD or CHECK of a gone netns is code 3; a netns that cannot be handed over is the
 * error that names the cause and the fix.
 */
export function handOverNetns(
  plugin: FullPlugin,
  socket: string,
  verb: string,
  netns: string,
  timeoutMs: number,
): { token: string } | { withoutNetns: true } {
  const sent = plugin.sendNetnsFd(socket, netns, timeoutMs);
  if ("failed" in sent) {
    throw new CniError(sent.failed.code, sent.failed.msg, sent.failed.details);
  }
  if ("token" in sent) return sent;
  if (verb !== "DEL") {
    throw new CniError(
      ErrorCode.UNKNOWN_CONTAINER,
      `container unknown: CNI_NETNS ${netns} does not exist`,
    );
  }
  return { withoutNetns: true };
}

/**
 * A daemon's refusal of `CNI_NETNS` as missing (3) or no netns (4), when the plugin sees a pod
 * netns there: the daemon's mount namespace does not reach it, and it did not ask for the
 * netns (a release from before the hand-over). The error says so and how to fix it; other
 * answers are left as they are.
 */
export async function explainUnseenNetns(
  verb: string,
  netns: string | undefined,
  answer: { stdout: string; exitCode: number },
  loadFull: () => Promise<FullPlugin>,
): Promise<{ stdout: string; exitCode: number }> {
  if (answer.exitCode !== 1 || !netns || (verb !== "ADD" && verb !== "CHECK")) return answer;
  let err: { cniVersion?: unknown; code?: unknown; msg?: unknown };
  try {
    err = JSON.parse(answer.stdout);
  } catch {
    return answer;
  }
  if (
    (err.code !== ErrorCode.UNKNOWN_CONTAINER && err.code !== ErrorCode.INVALID_ENV) ||
    typeof err.msg !== "string" || !err.msg.includes(`CNI_NETNS ${JSON.stringify(netns)}`) &&
      !err.msg.includes(`CNI_NETNS ${netns} `)
  ) return answer;
  if (!(await loadFull()).netnsIsHere(netns)) return answer;
  const dir = netns.slice(0, netns.lastIndexOf("/")) || "/";
  return {
    exitCode: 1,
    stdout: JSON.stringify({
      cniVersion: err.cniVersion,
      code: ErrorCode.INVALID_ENV,
      msg: `the IPAM daemon's mount namespace does not reach CNI_NETNS ${netns}, a pod ` +
        `netns here; the daemon said: ${err.msg}`,
      details: `mount the runtime's netns directory (${dir}) into the daemon's container ` +
        "with mountPropagation: HostToContainer, or upgrade the daemon to the plugin's " +
        "release, which takes the netns from the plugin",
    }),
  };
}
