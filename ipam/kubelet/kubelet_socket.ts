/**
 * Whether a kubelet is there: its registration socket (`kubelet.sock` in the device-plugin
 * directory) takes a connection. A directory, or a socket file an earlier kubelet left with
 * nobody listening, says nothing about a kubelet now. No gRPC here: the daemon asks this
 * while the device plugin is still off.
 *
 * @module
 */

/** The kubelet's registration socket's name inside the device-plugin directory. */
export const KUBELET_SOCKET = "kubelet.sock";

/** The path of the kubelet's registration socket in device-plugin directory `dir`. */
export function kubeletSocketPath(dir: string): string {
  return `${dir}/${KUBELET_SOCKET}`;
}

/**
 * True when something listens on the unix socket at `path`. A unix connect is answered at
 * once (accepted, refused, or no such file), so this never waits on a kubelet.
 */
export async function kubeletAnswers(path: string): Promise<boolean> {
  try {
    const conn = await Deno.connect({ transport: "unix", path });
    conn.close();
    return true;
  } catch {
    return false;
  }
}
