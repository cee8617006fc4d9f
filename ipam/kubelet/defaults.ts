/**
 * The kubelet's paths the daemon uses unless configured otherwise (the device-plugin
 * directory is fixed in the kubelet; pod-resources lives under the kubelet's root dir).
 *
 * @module
 */

/** Where the kubelet looks for device plugins and serves `kubelet.sock`. */
export const DEFAULT_DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins";
/** Where the kubelet serves pod-resources. */
export const DEFAULT_POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock";
