import assert from "node:assert/strict";
import { checkConsistency, checkDatapath } from "./checks.ts";
import { emptyFacts, type Facts, gatherFacts } from "./facts.ts";
import type { DatapathFindings } from "./datapath.ts";
import { renderCheck } from "./report.ts";
import { withDaemonDown } from "../tests/helpers/doctor_offline.ts";

function daemonDownFacts(extra: Partial<Facts>): Facts {
  return {
    ...emptyFacts({ reachable: false, healthy: false, ready: false, detail: "down" }),
    source: "checkpoint+kernel",
    ...extra,
  };
}

Deno.test("an unreadable checkpoint with the daemon down fails, with the way out", () => {
  const r = checkConsistency(
    daemonDownFacts({
      checkpointError: "checkpoint /var/lib/vpcni/ipam-checkpoint.json is not JSON",
      checkpointCorrupt: true,
    }),
    undefined,
    () => true,
  );
  assert.equal(r.status, "fail");
  assert.match(r.found, /is not JSON; the allocations are unknown/);
  assert.match(r.fix ?? "", /move the file aside, then start the daemon/);
  const absent = checkConsistency(
    daemonDownFacts({ checkpointError: "no checkpoint at /var/lib/vpcni/x" }),
    undefined,
    () => true,
  );
  assert.equal(absent.status, "ok", "a node with no checkpoint yet is not broken");
});

Deno.test("a newer release's checkpoint with the daemon down: the fix is that release, not a repair", async () => {
  await withDaemonDown("vqa-cpv-", async (o, dir) => {
    await Deno.writeTextFile(
      `${dir}/ipam-checkpoint.json`,
      JSON.stringify({ version: 2, instanceId: "i-1", savedAt: 1, allocations: [], cooldowns: [] }),
    );
    const f = await gatherFacts(o);
    assert.equal(f.checkpointNewer, 2);
    assert.equal(f.checkpointCorrupt, undefined, "not corrupt");
    const r = checkConsistency({ ...f, source: "checkpoint+kernel" }, undefined, () => true);
    assert.equal(r.status, "fail");
    assert.match(r.found, /has schema version 2; this release reads version 1/);
    assert.match(r.fix ?? "", /^run the release that wrote the checkpoint \(schema version 2\)/);
    const d = checkDatapath(
      daemonDownFacts({ checkpointNewer: 2 }),
      findings({ unjudged: ["10.0.1.5"] }),
    );
    assert.match(d.fix ?? "", /start the daemon of the release that wrote the checkpoint/);
  });
});

Deno.test("gatherFacts tells a corrupt checkpoint from a missing one", async () => {
  await withDaemonDown("vqa-cp-", async (o, dir) => {
    assert.equal((await gatherFacts(o)).checkpointCorrupt, undefined);
    await Deno.writeTextFile(`${dir}/ipam-checkpoint.json`, "{bad");
    const f = await gatherFacts(o);
    assert.equal(f.checkpointCorrupt, true);
    assert.match(f.checkpointError ?? "", /ipam-checkpoint\.json cannot be used: not JSON/);
  });
});

function daemonUpFacts(extra: Partial<Facts>): Facts {
  return daemonDownFacts({
    source: "daemon",
    daemon: { reachable: true, healthy: true, ready: true, detail: "up" },
    ...extra,
  });
}

function findings(extra: Partial<DatapathFindings>): DatapathFindings {
  return { missing: [], orphans: [], sysctl: [], goneNetns: [], held: [], unjudged: [], ...extra };
}

function fitsTerminal(r: ReturnType<typeof checkDatapath>): string[] {
  const lines = renderCheck(r, { color: false, maxDetails: 50 });
  for (const l of lines) assert.ok(l.length <= 80, `${l.length}: ${l}`);
  return lines;
}

Deno.test("addresses held for pods no allocation names are a warning, with nothing to fix", () => {
  const f = daemonUpFacts({ routedUnknown: ["10.0.1.7", "10.0.1.8"] });
  const r = checkDatapath(f, findings({ held: ["10.0.1.7", "10.0.1.8"] }));
  assert.equal(r.status, "warn");
  const lines = fitsTerminal(r);
  assert.equal(lines[0], "[warn] datapath: 2 address(es) held for pods no allocation names");
  assert.equal(
    lines.at(-1),
    "       fix: leave held addresses be: each comes back when its pod is deleted",
  );
  assert.match(r.details?.join("\n") ?? "", /10\.0\.1\.7: routed to a pod no allocation names/);
  assert.doesNotMatch(r.fix ?? "", /--fix/, "nothing for doctor datapath --fix to do");
});

Deno.test("with the allocations unknown, routed pod addresses are not judged: start the daemon", () => {
  const f = daemonDownFacts({ checkpointError: "no checkpoint at /var/lib/vpcni/x" });
  const r = checkDatapath(f, findings({ unjudged: ["10.0.1.5", "10.0.1.7"] }));
  assert.equal(r.status, "warn");
  const lines = fitsTerminal(r);
  assert.equal(
    lines[0],
    "[warn] datapath: cannot judge 2 pod address(es): no daemon, no checkpoint",
  );
  assert.equal(
    lines.at(-1),
    "       fix: start the daemon (it rebuilds its state), then run doctor again",
  );
  const corrupt = checkDatapath(
    daemonDownFacts({ checkpointError: "not JSON", checkpointCorrupt: true }),
    findings({ unjudged: ["10.0.1.5"] }),
  );
  fitsTerminal(corrupt);
  assert.match(corrupt.fix ?? "", /^move the checkpoint aside, start the daemon/);
});

Deno.test("held addresses beside real orphans: --fix is offered for the orphans only", () => {
  const r = checkDatapath(
    daemonUpFacts({ routedUnknown: ["10.0.1.7"] }),
    findings({
      held: ["10.0.1.7"],
      orphans: [{
        kind: "rule",
        rule: { priority: 1000, dst: "10.0.1.9/32", table: 254 },
        text: "orphan rule 1000: to 10.0.1.9/32 lookup main",
      }],
    }),
  );
  assert.equal(r.status, "warn");
  fitsTerminal(r);
  assert.equal(
    r.found,
    "1 orphan object(s), 1 address(es) held for pods no allocation names",
  );
  assert.match(
    r.fix ?? "",
    /--fix removes them \(delete rule 1000: to 10\.0\.1\.9\/32 lookup main\)/,
  );
  assert.match(r.fix ?? "", /; leave held addresses be/);
});

Deno.test("consistency: a pod netns the daemon could not see is not a disagreement", () => {
  const a = {
    network: "vpcni",
    containerId: "c-hidden",
    ifName: "eth0",
    ip: "10.0.1.5",
    eniId: "eni-1",
    pool: "default",
    netns: "/run/containerd/netns/cni-1",
  };
  const judge = (netnsHidden?: boolean) =>
    checkConsistency(
      daemonDownFacts({ allocations: [{ ...a, netnsHidden }] }),
      undefined,
      () => false,
    );
  assert.equal(judge(true).status, "ok", JSON.stringify(judge(true)));
  assert.equal(judge().status, "fail", "a netns the daemon saw and that is gone is reported");
});
