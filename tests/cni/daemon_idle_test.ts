/**
 * The daemon's threads that wire pods (ipam/cni_service.ts): with `cniWorkerIdleSeconds` N > 0
 * they run only while there is work — started by the first invocation, stopped after N s
 * idle, started again by the next one, which is served as before. With the knob at 0 (`warm`,
 * the default) one runs from the start and stays. Real workers running the plugin.
 */
import assert from "node:assert/strict";
import { CniService } from "../../ipam/cni_service.ts";
import { CNI_PROTOCOL_VERSION, type CniRunRequest, type CniRunResponse } from "../../proto/ipam.ts";

const VERSION_JOB = {
  version: CNI_PROTOCOL_VERSION,
  op: "cni" as const,
  env: { CNI_COMMAND: "VERSION" },
  stdin: '{"cniVersion":"1.0.0"}',
};

const refuse = () => Promise.resolve({ ok: false as const, code: 4, msg: "not here" });

/** Runs `job`; an answer other than what the plugin printed fails the test. */
async function ran(cni: CniService, job: CniRunRequest): Promise<CniRunResponse> {
  const r = await cni.run(job);
  assert.ok(r.ok, JSON.stringify(r));
  return r;
}

/** Waits until `cond` holds; fails after a generous bound (this only guards against a hang). */
async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 30_000;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`${what} did not happen within 30 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

Deno.test("an idle worker is stopped, and the next invocation starts one and is served", async () => {
  const cni = new CniService(refuse, { idleMs: 200 });
  try {
    assert.equal(cni.workers, 0, "no worker before the first invocation");
    const first = await ran(cni, VERSION_JOB);
    assert.equal(first.exitCode, 0, first.stdout);
    assert.equal(JSON.parse(first.stdout).cniVersion, "1.0.0");
    assert.equal(cni.workers, 1);
    await until(() => cni.workers === 0, "the idle worker's stop");
    const again = await ran(cni, VERSION_JOB);
    assert.equal(again.exitCode, 0, again.stdout);
    assert.deepEqual(JSON.parse(again.stdout), JSON.parse(first.stdout));
    assert.equal(cni.workers, 1);
  } finally {
    cni.close();
  }
});

Deno.test("a warm service starts its first worker at once and keeps it through idle time", async () => {
  const cni = new CniService(refuse, { idleMs: 100, warm: true });
  try {
    assert.equal(cni.workers, 1, "the first worker runs before any invocation");
    const r = await ran(cni, VERSION_JOB);
    assert.equal(r.exitCode, 0, r.stdout);
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(cni.workers, 1, "still running after ten idle times");
  } finally {
    cni.close();
  }
});
