/**
 * `vpcni doctor`: say what is wrong on this node and what to do, fast.
 *
 * `vpcni doctor` runs every check (one line each: ok/warn/FAIL, what was found, the fix)
 * and exits 1 if any failed. Subcommands show one side in depth: `limits`, `maxpods`,
 * `enis`, `pods`, `subnets`, `datapath [--fix]`, `bundle -o FILE`.
 *
 * @module
 */
import type { Command } from "commander";
import { CHECKPOINT_FILE } from "../ipam/checkpoint.ts";
import { doctorEc2Client, ec2Target, nodeSubnets } from "./cloud.ts";
import { type DoctorOptions, gatherFacts } from "./facts.ts";
import { describeFix, orphanKey, removeOrphan } from "./datapath.ts";
import {
  LimitsFlagError,
  limitsFor,
  limitsLines,
  maxPodsAnswer,
  type MaxPodsFlags,
} from "./limits.ts";
import { exitCodeFor, renderCheck, renderReport, useColor, wrap } from "./report.ts";
import { allocationsKnown, datapathFindings, runDoctor } from "./run.ts";
import { checkDatapath } from "./checks.ts";
import { eniRows, enisTable, podsTable, subnetRows, subnetsTable } from "./views.ts";
import { bundleFiles, writeBundle } from "./bundle.ts";
import { NetlinkSocket } from "../netlink/mod.ts";

const DEFAULT_DAEMON = "127.0.0.1:61679";
const DEFAULT_STATE_DIR = "/var/lib/vpcni";
const DEFAULT_CONFLIST = "/etc/cni/net.d/10-vpcni.conflist";
const DEFAULT_BIN_DIR = "/opt/cni/bin";
const DEFAULT_KUBELET_CONFIG = "/var/lib/kubelet/config.yaml";
const DEFAULT_TIMEOUT_MS = 3000;

/** Flags common to every doctor verb (commander's camelCase). */
interface CommonFlags {
  daemon?: string;
  stateDir?: string;
  config?: string;
  conflistFile?: string;
  binDir?: string;
  imdsEndpoint?: string;
  ec2Endpoint?: string;
  region?: string;
  kubeletMaxPods?: string;
  kubeletConfig?: string;
  timeout?: string;
  hostNetns?: string;
  json?: boolean;
}

/** Turns flags (and the daemon's environment variables) into options; errors name the flag. */
export function doctorOptions(f: CommonFlags): DoctorOptions {
  const env = (k: string) => Deno.env.get(k) || undefined;
  const listen = f.daemon ?? env("VPCNI_LISTEN") ?? DEFAULT_DAEMON;
  const daemonUrl = /^https?:\/\//.test(listen) ? listen.replace(/\/$/, "") : `http://${listen}`;
  try {
    new URL(daemonUrl);
  } catch {
    throw new LimitsFlagError(`--daemon: "${listen}" is not host:port or a URL`);
  }
  const timeout = Number(f.timeout ?? DEFAULT_TIMEOUT_MS);
  if (!Number.isInteger(timeout) || timeout < 100 || timeout > 60000) {
    throw new LimitsFlagError(`--timeout: "${f.timeout}" must be milliseconds from 100 to 60000`);
  }
  let kubeletMaxPods: number | undefined;
  if (f.kubeletMaxPods !== undefined) {
    kubeletMaxPods = Number(f.kubeletMaxPods);
    if (!/^\d+$/.test(f.kubeletMaxPods) || kubeletMaxPods < 1) {
      throw new LimitsFlagError(
        `--kubelet-max-pods: "${f.kubeletMaxPods}" must be a whole number ≥ 1`,
      );
    }
  }
  if (f.config !== undefined) {
    const problem = notAFile(f.config);
    if (problem) {
      throw new LimitsFlagError(
        `--config ${f.config}: ${problem}; name the daemon's config file, or leave --config ` +
          `out to use the defaults`,
      );
    }
  }
  if (f.hostNetns !== undefined && notAFile(f.hostNetns)) {
    throw new LimitsFlagError(
      `--host-netns ${f.hostNetns}: ${notAFile(f.hostNetns)}; give a netns file such as ` +
        `/var/run/netns/NAME or /proc/PID/ns/net`,
    );
  }
  return {
    daemonUrl,
    stateDir: f.stateDir ?? env("VPCNI_STATE_DIR") ?? DEFAULT_STATE_DIR,
    configFile: f.config,
    conflistFile: f.conflistFile ?? DEFAULT_CONFLIST,
    binDir: f.binDir ?? DEFAULT_BIN_DIR,
    imdsEndpoint: f.imdsEndpoint,
    ec2Endpoint: f.ec2Endpoint,
    region: f.region,
    kubeletMaxPods,
    kubeletConfig: f.kubeletConfig ?? DEFAULT_KUBELET_CONFIG,
    timeoutMs: timeout,
    hostNetns: f.hostNetns,
  };
}

function common(c: Command): Command {
  return c
    .option(
      "--daemon <host:port>",
      `daemon introspection address (env VPCNI_LISTEN; default: ${DEFAULT_DAEMON})`,
    )
    .option(
      "--state-dir <dir>",
      `daemon state dir holding the checkpoint (env VPCNI_STATE_DIR; default: ${DEFAULT_STATE_DIR})`,
    )
    .option("--config <file>", "daemon config file, read when the daemon is down")
    .option("--conflist-file <path>", `CNI conflist (default: ${DEFAULT_CONFLIST})`)
    .option("--bin-dir <dir>", `CNI bin dir (default: ${DEFAULT_BIN_DIR})`)
    .option("--imds-endpoint <url>", "IMDS endpoint (env AWS_EC2_METADATA_SERVICE_ENDPOINT)")
    .option("--ec2-endpoint <url>", "EC2 endpoint (env VPCNI_EC2_ENDPOINT)")
    .option("--region <region>", "EC2 region (default: from IMDS)")
    .option(
      "--timeout <ms>",
      `limit per request to the daemon, IMDS and EC2 (default: ${DEFAULT_TIMEOUT_MS})`,
    )
    .option("--host-netns <path>", "inspect this netns as the node's host netns")
    .option("--json", "machine-readable output");
}

/**
 * The flags of a subcommand merged with those given to `doctor` itself: commander lets the
 * parent take its options wherever they appear, so `doctor enis --json` may land on either.
 */
function flagsOf<T extends object>(cmd: Command): T {
  const out: Record<string, unknown> = {};
  const chain: Command[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) chain.unshift(c);
  for (const c of chain) {
    for (const [k, v] of Object.entries(c.opts())) if (v !== undefined) out[k] = v;
  }
  return out as T;
}

/** Runs a verb body, turning flag errors into exit code 2 with the message. */
async function guarded(fn: () => Promise<void> | void): Promise<void> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof LimitsFlagError) {
      console.error(wrap(`vpcni doctor: ${e.message}`, 80).join("\n"));
      Deno.exitCode = 2;
      return;
    }
    throw e;
  }
}

/** Why `path` is not an existing file, or undefined when it is one. */
function notAFile(path: string): string | undefined {
  try {
    return Deno.statSync(path).isDirectory ? "is a directory, not a file" : undefined;
  } catch (e) {
    return e instanceof Deno.errors.NotFound ? "no such file" : (e as Error).message;
  }
}

/** Refuses an `-o` that cannot be written, before minutes of gathering are spent on it. */
export function checkBundleOutput(path: string): void {
  const dir = path.includes("/") ? path.replace(/\/[^/]*$/, "") || "/" : ".";
  let st: Deno.FileInfo | undefined;
  try {
    st = Deno.statSync(dir);
  } catch {
    // reported below
  }
  if (!st?.isDirectory) {
    throw new LimitsFlagError(
      `-o/--output: ${dir} is not an existing directory; create it or write the bundle ` +
        `elsewhere, e.g. -o /tmp/vpcni-bundle.tar.gz`,
    );
  }
  try {
    if (Deno.statSync(path).isDirectory) {
      throw new LimitsFlagError(
        `-o/--output: ${path} is a directory; name a file, e.g. -o ${
          path.replace(/\/$/, "")
        }/vpcni-bundle.tar.gz`,
      );
    }
  } catch (e) {
    if (e instanceof LimitsFlagError) throw e;
  }
}

function printNotes(notes: string[]): void {
  for (const n of notes) console.error(wrap(`note: ${n}`, 80).join("\n"));
}

/** Adds the `doctor` verb and its subcommands to the program. */
export function registerDoctor(program: Command): void {
  const doctor = common(
    program.command("doctor")
      .description("diagnose why pods cannot get addresses; exit 1 if a check fails")
      // `vpcni doctor help maxpods` works as for `vpcni help doctor`, though doctor has an action.
      .helpCommand(true)
      .option("--kubelet-max-pods <n>", "kubelet's --max-pods (default: read from kubelet)")
      .option("--kubelet-config <file>", `kubelet config (default: ${DEFAULT_KUBELET_CONFIG})`)
      .addHelpText(
        "after",
        `
Each check prints ok, warn, FAIL or skip, what it found and the fix. Exit code:
0 when no check fails, 1 when one does, 2 for a bad flag. When the daemon does
not answer, doctor reads the checkpoint, IMDS and the kernel directly.

Examples:
  vpcni doctor                          every check, one line each
  vpcni doctor --json | jq '.checks[] | select(.status == "fail")'
  vpcni doctor maxpods --instance-type m5.xlarge
  vpcni doctor datapath                 what --fix would remove
  vpcni doctor bundle -o /tmp/vpcni-bundle.tar.gz`,
      ),
  ).action((_o: unknown, cmd: Command) =>
    guarded(async () => {
      const f = flagsOf<CommonFlags>(cmd);
      const report = await runDoctor(doctorOptions(f));
      if (f.json) console.log(JSON.stringify(report, null, 2));
      else console.log(renderReport(report, { color: useColor() }));
      Deno.exitCode = exitCodeFor(report.checks);
    })
  );

  doctor.command("limits")
    .description("what an instance type allows (ENIs, addresses, max pods)")
    .requiredOption("--instance-type <type>", "required, e.g. m5.xlarge")
    .option("--json", "machine-readable output")
    .action((_o: unknown, cmd: Command) =>
      guarded(() => {
        const f = flagsOf<{ instanceType: string; json?: boolean }>(cmd);
        const l = limitsFor(f.instanceType);
        console.log(f.json ? JSON.stringify(l, null, 2) : limitsLines(l).join("\n"));
      })
    );

  doctor.command("maxpods")
    .description("the --max-pods kubelet should use (the number alone on stdout)")
    .requiredOption("--instance-type <type>", "required, e.g. m5.xlarge")
    .option("--prefix-delegation", "pools use /28 prefixes")
    .option("--exclude-primary-eni", "pods never use the primary ENI")
    .option("--max-enis <n>", "use at most N ENIs")
    .option("--cap", "apply kubelet's customary cap (110; 250 above 30 vCPUs)")
    .option("--vcpus <n>", "vCPUs of the instance, for --cap")
    .option("--json", "machine-readable output")
    .addHelpText(
      "after",
      `
Examples:
  vpcni doctor maxpods --instance-type m5.large                  # 29
  vpcni doctor maxpods --instance-type m5.large --prefix-delegation --cap
  KUBELET_MAX_PODS=$(vpcni doctor maxpods --instance-type m5.large)`,
    )
    .action((_o: unknown, cmd: Command) =>
      guarded(() => {
        const f = flagsOf<MaxPodsFlags & { json?: boolean }>(cmd);
        const a = maxPodsAnswer(f);
        console.log(f.json ? JSON.stringify(a, null, 2) : String(a.maxPods));
      })
    );

  common(
    doctor.command("enis").description("ENIs: device, subnet, pool, SGs, IPs used/free/cooling"),
  )
    .action((_o: unknown, cmd: Command) =>
      guarded(async () => {
        const f = flagsOf<CommonFlags>(cmd);
        const facts = await gatherFacts(doctorOptions(f));
        const rows = eniRows(facts);
        if (f.json) return console.log(JSON.stringify(rows, null, 2));
        printNotes(facts.notes);
        console.log(enisTable(rows));
      })
    );

  common(doctor.command("pods").description("the allocations: pod, IP, ENI, pool"))
    .action((_o: unknown, cmd: Command) =>
      guarded(async () => {
        const f = flagsOf<CommonFlags>(cmd);
        const facts = await gatherFacts(doctorOptions(f));
        if (f.json) return console.log(JSON.stringify(facts.allocations, null, 2));
        printNotes(facts.notes);
        console.log(podsTable(facts));
      })
    );

  common(doctor.command("subnets").description("free addresses per subnet the pools can use"))
    .action((_o: unknown, cmd: Command) =>
      guarded(async () => {
        const f = flagsOf<CommonFlags>(cmd);
        const o = doctorOptions(f);
        const facts = await gatherFacts(o);
        const target = ec2Target(o, facts.config, facts.metadata);
        if (typeof target === "string" || !facts.metadata) {
          const why = typeof target === "string"
            ? target
            : `IMDS unreachable (${facts.imdsError}); ` +
              `the node's VPC and zone come from IMDS: run this on the node, or pass ` +
              `--imds-endpoint`;
          console.error(wrap(`vpcni doctor subnets: ${why}`, 80).join("\n"));
          Deno.exitCode = 1;
          return;
        }
        const ec2 = doctorEc2Client(target, o.timeoutMs);
        try {
          const rows = subnetRows(facts, await nodeSubnets(ec2, facts.metadata));
          if (f.json) return console.log(JSON.stringify(rows, null, 2));
          printNotes(facts.notes);
          console.log(subnetsTable(rows));
        } finally {
          ec2.close();
        }
      })
    );

  common(
    doctor.command("datapath")
      .description("allocations vs kernel objects; --fix removes only what is ours and orphaned")
      .option("--fix", "remove orphans (without it: print what would be done)"),
  ).action((_o: unknown, cmd: Command) =>
    guarded(async () => {
      const f = flagsOf<CommonFlags & { fix?: boolean }>(cmd);
      const o = doctorOptions(f);
      const facts = await gatherFacts(o);
      if (f.fix && !allocationsKnown(facts)) {
        // A running pod's rules, route and veth look exactly like a leftover's, so without
        // the allocations nothing is removed: deleting them cuts the pod off.
        const checkpoint = facts.checkpointCorrupt
          ? `the checkpoint in ${o.stateDir} unreadable`
          : `no checkpoint in ${o.stateDir}`;
        console.error(
          wrap(
            `vpcni doctor datapath: refusing --fix: with no daemon at ${o.daemonUrl} and ` +
              `${checkpoint}, every running pod would look orphaned; ` +
              (facts.checkpointCorrupt ? "move the checkpoint aside, " : "") +
              `start the daemon (it rebuilds its state), then run doctor again`,
            80,
          ).join("\n"),
        );
        Deno.exitCode = 2;
        return;
      }
      const first = datapathFindings(o, facts);
      const result = checkDatapath(facts, first);
      if (typeof first === "string") {
        if (f.json) console.log(JSON.stringify({ source: facts.source, check: result }, null, 2));
        else console.log(renderCheck(result, { color: useColor() }).join("\n"));
        return;
      }
      const actions: { action: string; done: boolean; error?: string }[] = [];
      if (first.orphans.length > 0) {
        // Look again with fresh allocations: act only on what both looks call orphaned,
        // so a pod being added right now is never touched.
        const again = f.fix ? datapathFindings(o, await gatherFacts(o)) : first;
        const stable = new Set(typeof again === "string" ? [] : again.orphans.map(orphanKey));
        const s = f.fix
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
      }
      if (f.json) {
        console.log(
          JSON.stringify(
            { source: facts.source, check: result, findings: first, actions },
            null,
            2,
          ),
        );
      } else {
        printNotes(facts.notes);
        console.log(renderCheck(result, { color: useColor(), maxDetails: 50 }).join("\n"));
        for (const a of actions) {
          console.log(
            `${a.done ? "done:" : a.error ? "FAILED:" : ""} ${a.action}${
              a.error ? ` (${a.error})` : ""
            }`.trim(),
          );
        }
        if (!f.fix && actions.length > 0) console.log("run with --fix to do this");
      }
      const failedFix = actions.some((a) => a.error);
      Deno.exitCode = result.status === "fail" || failedFix ? 1 : 0;
    })
  );

  common(
    doctor.command("bundle")
      .description("write a tar.gz of config, state, introspection, kernel dumps and logs")
      .requiredOption("-o, --output <file>", "the .tar.gz to write"),
  ).action((_o: unknown, cmd: Command) =>
    guarded(async () => {
      const f = flagsOf<CommonFlags & { output: string }>(cmd);
      checkBundleOutput(f.output);
      const o = doctorOptions(f);
      const facts = await gatherFacts(o);
      const report = await runDoctor(o);
      const files = await bundleFiles(o, facts, report);
      await writeBundle(f.output, files);
      console.log(
        `wrote ${f.output}: ${files.length} files (checkpoint ${o.stateDir}/${CHECKPOINT_FILE}` +
          `, facts from ${facts.source}); credentials redacted`,
      );
    })
  );
}
