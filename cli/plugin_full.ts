/**
 * The whole CNI plugin as one bundle (`vpcni-plugin-full.js`, cli/launcher.ts), beside the
 * thin plugin's: the thin plugin loads it when it hands over (cni/thin.ts), and in the image the
 * daemon starts its CNI workers from it (ipam/cni_worker.ts registers the worker's handler when
 * it runs on such a thread, and does nothing elsewhere). One file for both keeps the AWS SDK and
 * the rest of the program out of the workers' isolates. No npm: the pod's path may load it.
 *
 * @module
 */
export { netnsIsHere, runPlugin, sendNetnsFd } from "../cni/plugin.ts";
import "../ipam/cni_worker.ts";
