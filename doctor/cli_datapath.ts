/**
 * `vpcni doctor datapath [--fix]`: the allocations against the kernel objects, and what
 * `--fix` removes (without it: what it would remove).
 *
 * Two rules keep `--fix` from cutting off a running pod. It refuses when the allocations
 * are unknown (no daemon, no readable checkpoint), since every pod would then look
 * orphaned. And it removes only what two consecutive looks both call orphaned, so a pod
 * being added between them is never touched.
 *
 * @module
 */
import { jsonText, visible } from "./printable.ts";
import { NetlinkSocket } from "../netlink/mod.ts";
import { type DoctorOptions, type Facts, gatherFacts } from "./facts.ts";
import type { DatapathFindings } from "./datapath.ts";
import { describeFix, orphanKey, removeOrphan } from "./datapath_fix.ts";
import { allocationsKnown, datapathFindings } from "./run.ts";
import { checkDatapath, startDaemonFix } from "./checks.ts";
import { renderCheck, useColor, wrap } from "./report.ts";
import { type CommonFlags, doctorOptions, printNotes } from "./cli_flags.ts";
import { fixSnat } from "./snat.ts";

/** The egress ruleset's repair (doctor/snat.ts), as a fix action. */
function egressFix(facts: Facts, hostNetns?: string): FixAction[] {
  try {
    const done = fixSnat(facts, hostNetns);
    return done ? [{ action: done, done: true }] : [];
  } catch (e) {
    return [{ action: "repair the egress ruleset", done: false, error: (e as Error).message }];
  }
}

/** The flags of `doctor datapath`: the common ones and `--fix`. */
export type DatapathFlags = CommonFlags & { fix?: boolean };

/** One repair: done, failed with `error`, or (without --fix) only described. */
interface FixAction {
  action: string;
  done: boolean;
  error?: string;
}

/** The verb: the datapath check, then the orphans removed or listed; sets the exit code. */
export async function doctorDatapath(f: DatapathFlags): Promise<void> {
  const o = doctorOptions(f);
  const facts = await gatherFacts(o);
  if (f.fix && !allocationsKnown(facts)) {
    refuseFix(o, facts);
    return;
  }
  const first = datapathFindings(o, facts);
  const result = checkDatapath(facts, first);
  if (typeof first === "string") {
    if (f.json) console.log(jsonText({ source: facts.source, check: result }));
    else console.log(renderCheck(result, { color: useColor() }).join("\n"));
    return;
  }
  const actions = first.orphans.length > 0 ? await fixOrphans(o, first, !!f.fix) : [];
  if (f.fix) actions.push(...egressFix(facts, o.hostNetns));
  if (f.json) {
    console.log(
      jsonText({ source: facts.source, check: result, findings: first, actions }),
    );
  } else {
    printNotes(facts.notes);
    console.log(renderCheck(result, { color: useColor(), maxDetails: 50 }).join("\n"));
    for (const a of actions) {
      console.log(
        visible(
          `${a.done ? "done:" : a.error ? "FAILED:" : ""} ${a.action}${
            a.error ? ` (${a.error})` : ""
          }`.trim(),
        ),
      );
    }
    if (!f.fix && actions.length > 0) console.log("run with --fix to do this");
  }
  const failedFix = actions.some((a) => a.error);
  Deno.exitCode = result.status === "fail" || failedFix ? 1 : 0;
}

/**
 * Says why `--fix` does nothing here; exit code 2. A running pod's rules, route and veth look
 * exactly like a leftover's, so without the allocations nothing is removed: deleting them
 * cuts the pod off.
 */
function refuseFix(o: DoctorOptions, facts: Facts): void {
  const checkpoint = facts.checkpointCorrupt || facts.checkpointNewer !== undefined
    ? `the checkpoint in ${o.stateDir} unreadable`
    : `no checkpoint in ${o.stateDir}`;
  console.error(
    wrap(
      `vpcni doctor datapath: refusing --fix: with no daemon at ${o.daemonUrl} and ` +
        `${checkpoint}, every running pod would look orphaned; ` +
        `${startDaemonFix(facts)} (it rebuilds its state), then run doctor again`,
      80,
    ).join("\n"),
  );
  Deno.exitCode = 2;
}

/**
 * With `fix`, removes the orphans of `first` that a second look with fresh allocations finds
 * too, so a pod being added right now is never touched; without, says what it would remove.
 */
async function fixOrphans(
  o: DoctorOptions,
  first: DatapathFindings,
  fix: boolean,
): Promise<FixAction[]> {
  const actions: FixAction[] = [];
  const again = fix ? datapathFindings(o, await gatherFacts(o)) : first;
  const stable = new Set(typeof again === "string" ? [] : again.orphans.map(orphanKey));
  const s = fix
    ? (o.hostNetns ? NetlinkSocket.openIn(o.hostNetns) : NetlinkSocket.open())
    : undefined;
  try {
    for (const orphan of first.orphans.filter((x) => stable.has(orphanKey(x)))) {
      if (!s) {
        actions.push({ action: `would ${describeFix(orphan)}`, done: false });
        continue;
      }
      try {
        removeOrphan(s, orphan);
        actions.push({ action: describeFix(orphan), done: true });
      } catch (e) {
        actions.push({
          action: describeFix(orphan),
          done: false,
          error: (e as Error).message,
        });
      }
    }
  } finally {
    s?.close();
  }
  return actions;
}
