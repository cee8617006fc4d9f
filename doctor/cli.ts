/**
 * `vpcni doctor`: say what is wrong on this node and what to do, fast.
 *
 * `vpcni doctor` runs every check (one line each: ok/warn/FAIL, what was found, the fix)
 * and exits 1 if any failed. Subcommands show one side in depth: `limits`, `maxpods`,
 * `enis`, `pods`, `subnets`, `datapath [--fix]`, `bundle -o FILE`.
 *
 * The flags the verbs share are in doctor/cli_flags.ts; what `datapath` does, with its
 * guards on `--fix`, is in doctor/cli_datapath.ts.
 *
 * @module
 */
import { jsonText, visible } from "./printable.ts";
import type { Command } from "commander";
import { CHECKPOINT_FILE } from "../ipam/checkpoint.ts";
import { doctorEc2Client, ec2Target, nodeSubnets } from "./cloud.ts";
import { gatherFacts } from "./facts.ts";
import {
  LimitsFlagError,
  limitsFor,
  limitsLines,
  maxPodsAnswer,
  type MaxPodsFlags,
} from "./limits.ts";
import { exitCodeFor, renderReport, useColor, wrap } from "./report.ts";
import { runDoctor } from "./run.ts";
import { eniRows, enisTable, podsTable, subnetRows, subnetsTable } from "./views.ts";
import { bundleFiles, writeBundle } from "./bundle.ts";
import {
  type CommonFlags,
  DEFAULT_KUBELET_CONFIG,
  doctorOptions,
  flagsOf,
  guarded,
  printNotes,
  withCommonFlags,
} from "./cli_flags.ts";
import { type DatapathFlags, doctorDatapath } from "./cli_datapath.ts";

/** Adds the `doctor` verb and its subcommands to the program. */
export function registerDoctor(program: Command): void {
  const doctor = withCommonFlags(
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
      if (f.json) console.log(jsonText(report));
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
        console.log(f.json ? jsonText(l) : limitsLines(l).map(visible).join("\n"));
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
        console.log(f.json ? jsonText(a) : String(a.maxPods));
      })
    );

  withCommonFlags(
    doctor.command("enis").description("ENIs: device, subnet, pool, SGs, IPs used/free/cooling"),
  )
    .action((_o: unknown, cmd: Command) =>
      guarded(async () => {
        const f = flagsOf<CommonFlags>(cmd);
        const facts = await gatherFacts(doctorOptions(f));
        const rows = eniRows(facts);
        if (f.json) return console.log(jsonText(rows));
        printNotes(facts.notes);
        console.log(enisTable(rows));
      })
    );

  withCommonFlags(doctor.command("pods").description("the allocations: pod, IP, ENI, pool"))
    .action((_o: unknown, cmd: Command) =>
      guarded(async () => {
        const f = flagsOf<CommonFlags>(cmd);
        const facts = await gatherFacts(doctorOptions(f));
        if (f.json) return console.log(jsonText(facts.allocations));
        printNotes(facts.notes);
        console.log(podsTable(facts));
      })
    );

  withCommonFlags(
    doctor.command("subnets").description("free addresses per subnet the pools can use"),
  )
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
          console.error(wrap(visible(`vpcni doctor subnets: ${why}`), 80).join("\n"));
          Deno.exitCode = 1;
          return;
        }
        const ec2 = doctorEc2Client(target, o.timeoutMs);
        try {
          const rows = subnetRows(facts, await nodeSubnets(ec2, facts.metadata));
          if (f.json) return console.log(jsonText(rows));
          printNotes(facts.notes);
          console.log(subnetsTable(rows));
        } finally {
          ec2.close();
        }
      })
    );

  withCommonFlags(
    doctor.command("datapath")
      .description("allocations vs kernel objects; --fix removes only what is ours and orphaned")
      .option("--fix", "remove orphans (without it: print what would be done)"),
  ).action((_o: unknown, cmd: Command) =>
    guarded(() => doctorDatapath(flagsOf<DatapathFlags>(cmd)))
  );

  withCommonFlags(
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
