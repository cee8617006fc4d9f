/**
 * The vpcni image for the lane, built the way a user builds it: `deno task image` (an OCI
 * archive for `ctr -n k8s.io images import`), into a temp file of the lane.
 *
 * @module
 */

const REPO = new URL("../..", import.meta.url).pathname;

/** A built image archive and the name it carries. */
export interface LaneImage {
  path: string;
  name: string;
}

/** Builds the image into `dir`; throws with the tool's output when it fails. */
export async function buildVpcniImage(dir: string): Promise<LaneImage> {
  const path = `${dir}/vpcni-image.tar`;
  const out = await new Deno.Command("deno", {
    args: ["task", "--quiet", "image", "--output", path],
    cwd: REPO,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  if (!out.success) {
    throw new Error(
      `deno task image failed (${out.code}):\n${dec.decode(out.stdout)}${dec.decode(out.stderr)}`,
    );
  }
  const index = await new Deno.Command("tar", {
    args: ["-xOf", path, "./index.json"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!index.success) {
    throw new Error(`${path} has no index.json: ${dec.decode(index.stderr)}`);
  }
  const manifests = JSON.parse(dec.decode(index.stdout)).manifests as {
    annotations?: Record<string, string>;
  }[];
  const name = manifests[0]?.annotations?.["io.containerd.image.name"];
  if (!name) throw new Error(`${path}: index.json names no image (io.containerd.image.name)`);
  return { path, name };
}
