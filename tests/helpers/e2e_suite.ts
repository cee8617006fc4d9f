/**
 * Running Kubernetes' own e2e suite (`e2e.test` of k8s.io/kubernetes, built by
 * `tools/dev setup`) against the lane's cluster, and reading its JUnit report.
 *
 * The suite runs inside the node (its network and mount namespaces), where the admin
 * kubeconfig's `https://127.0.0.1:6443` is the API server and pod and Service addresses
 * route as they do for the node's own processes. With more than one process it runs under
 * the ginkgo CLI, which starts that many `e2e.test` processes and merges their reports.
 *
 * @module
 */
import type { LaneCluster } from "./k8s_cluster.ts";
import { K8S_BIN } from "./k8s_bins.ts";

/** The suite's programs, as `tools/dev setup` leaves them. */
export interface E2eBinaries {
  e2eTest: string;
  ginkgo: string;
  kubectl: string;
}

/** Finds the suite's programs; throws one error listing each missing one. */
export function e2eBinaries(): E2eBinaries {
  const bins = {
    e2eTest: `${K8S_BIN}/e2e.test`,
    ginkgo: `${K8S_BIN}/ginkgo`,
    kubectl: `${K8S_BIN}/kubectl`,
  };
  const missing = Object.values(bins).filter((p) => {
    try {
      return !Deno.statSync(p).isFile;
    } catch {
      return true;
    }
  });
  if (missing.length > 0) {
    throw new Error(
      `the conformance run needs ${missing.join(", ")}: bash tools/dev setup builds them`,
    );
  }
  return bins;
}

/** What to run. */
export interface SuiteRun {
  /** ginkgo's focus regexp (which specs run). */
  focus: string;
  /** ginkgo's skip regexp. */
  skip?: string;
  /** Parallel ginkgo processes; 1 runs `e2e.test` by itself. */
  procs: number;
  /** Where the JUnit report (`junit_01.xml`) and the run's log go. */
  reportDir: string;
}

/** One finished run. */
export interface SuiteResult {
  code: number;
  wallMs: number;
  junit: string;
  log: string;
}

/** The argv of the run, to be wrapped into the node. */
export function suiteArgv(c: LaneCluster, b: E2eBinaries, r: SuiteRun): string[] {
  const suiteFlags = [
    "--provider=skeleton",
    `--kubeconfig=${c.pki.kubeconfig.admin}`,
    `--kubectl-path=${b.kubectl}`,
    "--dns-domain=cluster.local",
    // The skeleton provider knows no node count (-1): the specs that spread endpoints over
    // nodes skip themselves unless told how many there are, as a cloud provider would.
    `--num-nodes=${c.nodes.length}`,
    `--report-dir=${r.reportDir}`,
  ];
  const ginkgoFlags = [
    `focus=${r.focus}`,
    ...(r.skip ? [`skip=${r.skip}`] : []),
    "no-color",
    "timeout=1h",
  ];
  if (r.procs <= 1) {
    return [b.e2eTest, ...suiteFlags, ...ginkgoFlags.map((f) => `--ginkgo.${f}`)];
  }
  return [
    b.ginkgo,
    `--procs=${r.procs}`,
    ...ginkgoFlags.map((f) => `--${f}`),
    b.e2eTest,
    "--",
    ...suiteFlags,
  ];
}

/**
 * Runs the suite inside the node; its output goes to the terminal and to `run.log` in the
 * report dir. Resolves when it exits, whatever its exit code.
 */
export async function runSuite(c: LaneCluster, b: E2eBinaries, r: SuiteRun): Promise<SuiteResult> {
  await Deno.mkdir(r.reportDir, { recursive: true });
  for (const e of Deno.readDirSync(r.reportDir)) {
    if (e.name.endsWith(".xml")) await Deno.remove(`${r.reportDir}/${e.name}`);
  }
  const log = `${r.reportDir}/run.log`;
  const file = await Deno.open(log, { create: true, write: true, truncate: true });
  const argv = c.node.wrap(suiteArgv(c, b, r));
  await file.write(new TextEncoder().encode(`$ ${argv.join(" ")}\n`));
  const started = performance.now();
  const proc = new Deno.Command(argv[0], {
    args: argv.slice(1),
    cwd: r.reportDir,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const copy = async (
    stream: ReadableStream<Uint8Array>,
    to: { write(b: Uint8Array): unknown },
  ) => {
    for await (const chunk of stream) {
      await file.write(chunk);
      await to.write(chunk);
    }
  };
  await Promise.all([copy(proc.stdout, Deno.stdout), copy(proc.stderr, Deno.stderr)]);
  const status = await proc.status;
  file.close();
  return {
    code: status.code,
    wallMs: performance.now() - started,
    junit: `${r.reportDir}/junit_01.xml`,
    log,
  };
}

/** One spec of the report. */
export interface SpecResult {
  name: string;
  status: string;
  /** The failure (or skip) message, unescaped. */
  message: string;
}

/** A report's specs, counted. */
export interface JunitSummary {
  passed: SpecResult[];
  failed: SpecResult[];
  /** Specs that were selected and skipped themselves (a `Skip` at run time). */
  skipped: SpecResult[];
  /** Specs the focus and skip did not select (listed as skipped, message "skipped"). */
  notSelected: number;
}

function unescapeXml(s: string): string {
  return s.replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&quot;", '"')
    .replaceAll("&apos;", "'").replaceAll("&#xA;", "\n").replaceAll("&#x9;", "\t")
    .replaceAll("&amp;", "&");
}

function attr(tag: string, name: string): string {
  const m = tag.match(new RegExp(`\\s${name}="([^"]*)"`));
  return m ? unescapeXml(m[1]) : "";
}

/**
 * Reads ginkgo's JUnit report: every `[It]` test case by status. The suite-level entries
 * (`[SynchronizedBeforeSuite]`, `[ReportAfterSuite]`, …) are left out, but one that failed
 * counts as a failure, since then no spec result can be trusted.
 */
export function summariseJunit(xml: string): JunitSummary {
  const out: JunitSummary = { passed: [], failed: [], skipped: [], notSelected: 0 };
  for (const m of xml.matchAll(/<testcase\b([^>]*?)(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const tag = m[1];
    const body = m[3] ?? "";
    const name = attr(tag, "name");
    const status = attr(tag, "status");
    // ginkgo puts a failure's text in the element's body (its message attribute is empty)
    // and a skip's reason in the attribute.
    const inner = body.match(/<(failure|skipped|error)\b([^>]*?)(\/>|>([^<]*))/);
    const message = inner ? (attr(inner[2], "message") || unescapeXml(inner[4] ?? "")) : "";
    const spec = { name, status, message };
    if (!name.startsWith("[It]")) {
      if (status !== "passed" && status !== "skipped") out.failed.push(spec);
    } else if (status === "passed") out.passed.push(spec);
    else if (status === "skipped") {
      if (message === "skipped") out.notSelected++;
      else out.skipped.push(spec);
    } else out.failed.push(spec);
  }
  return out;
}

/** One line: passed / failed / skipped and the wall time. */
export function summaryLine(label: string, s: JunitSummary, wallMs: number): string {
  return `${label}: ${s.passed.length} passed, ${s.failed.length} failed, ` +
    `${s.skipped.length} skipped, in ${(wallMs / 1000).toFixed(0)} s`;
}
