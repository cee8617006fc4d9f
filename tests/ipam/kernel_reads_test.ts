/**
 * Kernel reads that fail are logged, not swallowed: the daemon answers "cannot tell" (which
 * keeps addresses held) and says why in a JSON log line. The failures are the kernel's own:
 * stat through a regular file (ENOTDIR), and setns into a namespace that is not a network
 * namespace (EINVAL).
 */
import assert from "node:assert/strict";
import { hostKernelView } from "../../ipam/kernel_view.ts";
import { captureLog } from "./log_capture.ts";

Deno.test("kernel view: a pod netns that cannot be stat'ed is 'cannot tell', and logged", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vip-kv-" });
  const capture = await captureLog();
  try {
    await Deno.writeTextFile(`${dir}/file`, "");
    const view = hostKernelView();
    assert.equal(await view.podAlive({ netns: `${dir}/gone` }), false, "a missing netns is gone");
    assert.equal(
      await view.podAlive({ netns: `${dir}/file/netns` }),
      undefined,
      "ENOTDIR: cannot tell",
    );
    const lines = capture.records().filter((r) => r.level === "WARN");
    assert.equal(lines.length, 1, JSON.stringify(lines));
    const props = lines[0].properties as Record<string, string>;
    assert.equal(props.netns, `${dir}/file/netns`);
    assert.match(props.error, /Not a directory|NotADirectory/);
  } finally {
    await capture.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("kernel view: routes that cannot be read are 'cannot tell', logged once per error", async () => {
  const capture = await captureLog();
  try {
    // A mount namespace's file: the kernel refuses setns(CLONE_NEWNET) on it.
    const view = hostKernelView("/proc/self/ns/mnt");
    assert.equal(await view.routedPodIps(), undefined);
    assert.equal(await view.routedPodIps(), undefined);
    const lines = capture.records().filter((r) => r.level === "WARN");
    assert.equal(lines.length, 1, `the same error twice is one line: ${JSON.stringify(lines)}`);
    const props = lines[0].properties as Record<string, string>;
    assert.equal(props.netns, "/proc/self/ns/mnt");
    assert.match(props.error, /setns.*Invalid argument/);
    // The daemon's own netns reads fine (and a later failure would be logged again).
    assert.ok((await hostKernelView().routedPodIps()) instanceof Set);
  } finally {
    await capture.stop();
  }
});
