/**
 * Churn: 10 pod ADDs per second for 2 minutes (VPCNI_CHURN_SECONDS shortens it) on an
 * m5.xlarge-like node (4 ENIs × 15 addresses), each pod living ~2.5 s. Every ADD gets an
 * address, no two live pods ever share one, and once warm the pool neither flaps (assign /
 * unassign churn in EC2) nor makes ADDs wait on EC2.
 */
import assert from "node:assert/strict";
import {
  addReq,
  delReq,
  metricValue,
  simNodeEnis,
  standardScenario,
  startStack,
} from "./harness.ts";

const SECONDS = Number(Deno.env.get("VPCNI_CHURN_SECONDS") ?? 120);
const RATE = 10;

Deno.test(`churn: ${RATE} pods/s for ${SECONDS} s on m5.xlarge`, async () => {
  const stack = await startStack(standardScenario({ type: "m5.xlarge" }), {
    pools: [{ name: "default", warmEnis: 0, warmIps: 8, ipCooldownSeconds: 2 }],
    releaseDelaySeconds: 30,
  });
  try {
    const live = new Map<string, string>();
    const failures: string[] = [];
    const pending: Promise<void>[] = [];
    const warmupMs = Math.min(20_000, SECONDS * 1000 / 4);
    let steadyStart: string | undefined;
    const t0 = Date.now();
    let n = 0;
    while (Date.now() - t0 < SECONDS * 1000) {
      const due = t0 + (n * 1000) / RATE;
      if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
      if (!steadyStart && Date.now() - t0 >= warmupMs) steadyStart = await stack.metrics();
      const pod = `ch${n++}`;
      pending.push((async () => {
        const r = await stack.call(addReq(pod));
        if (!r.ok || !("allocation" in r)) {
          failures.push(`${pod}: ${JSON.stringify(r)}`);
          return;
        }
        const ip = r.allocation.ip;
        for (const [other, otherIp] of live) {
          if (otherIp === ip) failures.push(`${ip} given to ${pod} while ${other} holds it`);
        }
        live.set(pod, ip);
        await new Promise((r) => setTimeout(r, 1500 + Math.random() * 2000));
        live.delete(pod);
        const d = await stack.call(delReq(pod));
        if (!d.ok) failures.push(`DEL ${pod}: ${JSON.stringify(d)}`);
      })());
    }
    await Promise.all(pending);
    const end = await stack.metrics();
    assert.deepEqual(failures.slice(0, 5), []);
    assert.ok(n >= SECONDS * RATE * 0.95, `only ${n} ADDs were sent`);

    const delta = (name: string, labels: Record<string, string> = {}) =>
      metricValue(end, name, labels) - metricValue(steadyStart!, name, labels);
    const waited = delta("vpcni_ipam_adds_total", { result: "waited" });
    const assigns = delta("vpcni_ec2_calls_total", { action: "AssignPrivateIpAddresses" });
    const unassigns = delta("vpcni_ec2_calls_total", { action: "UnassignPrivateIpAddresses" });
    console.log(
      `churn: ${n} ADDs; steady state: ${waited} waited on EC2, ${assigns} assign and ` +
        `${unassigns} unassign calls`,
    );
    assert.equal(waited, 0, "once warm, no ADD waits on EC2");
    assert.ok(
      assigns + unassigns <= 4,
      `the pool flapped: ${assigns} assigns, ${unassigns} unassigns`,
    );

    // The daemon's view and EC2 agree at the end.
    const enis = await stack.introspect<{ ips: string[] }[]>("/v1/enis");
    const ours = new Set(enis.flatMap((e) => e.ips));
    const ec2 = new Set(simNodeEnis(stack.sim).flatMap((e) => e.ips));
    assert.deepEqual([...ours].sort(), [...ec2].sort());
    assert.equal((await stack.introspect<unknown[]>("/v1/allocations")).length, 0);
  } finally {
    await stack.close();
  }
});
