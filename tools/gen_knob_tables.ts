/**
 * Writes the knob table and the metrics table of README.md and ipam/README.md: the knobs from
 * `KNOBS` (ipam/knobs.ts), so the documentation and `vpcni serve --list-knobs` never
 * disagree; the metrics from `METRIC_DOCS` (ipam/metrics.ts), which a test holds to what the
 * daemon exports. Each table is the block of lines starting with its header row (`| knob`,
 * `| metric`) up to the first line that is not a table row.
 *
 *   deno run -A tools/gen_knob_tables.ts           rewrite the tables
 *   deno run -A tools/gen_knob_tables.ts --check   exit 1 naming a stale file
 *
 * @module
 */
import { type KnobDoc, KNOBS } from "../ipam/knobs.ts";
import { METRIC_DOCS, type MetricDoc } from "../ipam/metrics.ts";

/** The READMEs that carry the knob and metrics tables, relative to the repository root. */
export const KNOB_TABLE_FILES = ["README.md", "ipam/README.md"];

function cell(text: string): string {
  return text.replaceAll("|", "\\|");
}

/** Renders the knob table as aligned Markdown rows (what `deno fmt` would produce). */
export function renderKnobTable(knobs: readonly KnobDoc[]): string[] {
  return renderTable([
    ["knob", "default", "env", "flag", "meaning"],
    ...knobs.map((k) => [
      `\`${k.knob}\``,
      cell(k.def),
      k.env ? `\`${k.env}\`` : "",
      k.flag ? `\`${k.flag}\`` : "",
      cell(k.doc),
    ]),
  ]);
}

/** Renders the metrics table: each metric with its labels, and what it counts. */
export function renderMetricTable(metrics: readonly MetricDoc[]): string[] {
  return renderTable([
    ["metric", "meaning"],
    ...metrics.map((m) => [`\`${metricRowName(m)}\``, cell(m.doc)]),
  ]);
}

/** A metric as the README names it: `name{label,…}`. */
export function metricRowName(m: MetricDoc): string {
  return m.labels.length > 0 ? `${m.name}{${m.labels.join(",")}}` : m.name;
}

/** Aligned Markdown rows, header first. */
function renderTable(rows: string[][]): string[] {
  const widths = rows[0].map((_, i) => Math.max(3, ...rows.map((r) => [...r[i]].length)));
  const line = (r: string[]) =>
    `| ${r.map((c, i) => c + " ".repeat(widths[i] - [...c].length)).join(" | ")} |`;
  return [
    line(rows[0]),
    `| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`,
    ...rows.slice(1).map(line),
  ];
}

/** Replaces the knob table in `text`; throws when there is none. */
export function replaceKnobTable(text: string, knobs: readonly KnobDoc[], file: string): string {
  return replaceTable(text, /^\| knob +\| default/, renderKnobTable(knobs), file, "knob", [
    "knob",
    "default",
  ]);
}

/** Replaces the metrics table in `text`; throws when there is none. */
export function replaceMetricTable(
  text: string,
  metrics: readonly MetricDoc[],
  file: string,
): string {
  return replaceTable(text, /^\| metric +\| meaning/, renderMetricTable(metrics), file, "metrics", [
    "metric",
    "meaning",
  ]);
}

function replaceTable(
  text: string,
  header: RegExp,
  rows: string[],
  file: string,
  what: string,
  columns: string[],
): string {
  const lines = text.split("\n");
  const start = lines.findIndex((l) => header.test(l));
  if (start < 0) {
    throw new Error(`${file}: no ${what} table (a line starting "| ${columns.join(" | ")}")`);
  }
  let end = start;
  while (end < lines.length && lines[end].startsWith("|")) end++;
  return [...lines.slice(0, start), ...rows, ...lines.slice(end)].join("\n");
}

/** `text` with both tables as the sources make them. */
export function regenerate(text: string, file: string): string {
  return replaceMetricTable(replaceKnobTable(text, KNOBS, file), METRIC_DOCS, file);
}

if (import.meta.main) {
  const check = Deno.args.includes("--check");
  const root = new URL("../", import.meta.url);
  let stale = 0;
  for (const file of KNOB_TABLE_FILES) {
    const url = new URL(file, root);
    const text = await Deno.readTextFile(url);
    const next = regenerate(text, file);
    if (next === text) continue;
    if (check) {
      console.error(
        `${file}: a generated table is stale; run deno run -A tools/gen_knob_tables.ts`,
      );
      stale++;
    } else {
      await Deno.writeTextFile(url, next);
      console.error(`wrote ${file}`);
    }
  }
  Deno.exit(stale ? 1 : 0);
}
