/**
 * Check results and how they are printed: one line per check (status, name, what was
 * found), the fix on an indented line below, everything wrapped to 80 columns, colour only
 * when stdout is a terminal.
 *
 * @module
 */

import { visible } from "./printable.ts";

/** How a check came out. `skip` means it could not run (its source was unavailable). */
export type CheckStatus = "ok" | "warn" | "fail" | "skip";

/** The outcome of one check. */
export interface CheckResult {
  /** Stable identifier for scripts, e.g. `daemon`, `datapath`. */
  id: string;
  /** Short human name, e.g. "daemon health". */
  title: string;
  status: CheckStatus;
  /** What was found, one sentence. */
  found: string;
  /** What to do about it; present for warn and fail. */
  fix?: string;
  /** Extra lines (one per problem) shown under the check, at most a few on screen. */
  details?: string[];
}

/** What `doctor --json` prints. */
export interface DoctorReport {
  ok: boolean;
  /** Where the facts came from: "daemon" or "checkpoint+kernel" (daemon down). */
  source: string;
  notes: string[];
  checks: CheckResult[];
}

/** Exit code for a report: 0 unless a check failed. */
export function exitCodeFor(checks: CheckResult[]): number {
  return checks.some((c) => c.status === "fail") ? 1 : 0;
}

/** Options for rendering. */
export interface RenderOptions {
  /** Use ANSI colours (only when writing to a TTY). */
  color: boolean;
  /** Column limit (80). */
  width?: number;
  /** Detail lines shown per check before "… and N more". */
  maxDetails?: number;
}

const COLORS: Record<CheckStatus, string> = {
  ok: "\x1b[32m",
  warn: "\x1b[33m",
  fail: "\x1b[31m",
  skip: "\x1b[90m",
};
const RESET = "\x1b[0m";

/** Splits `text` into lines of at most `width` columns, breaking at spaces when it can. */
export function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  for (const para of text.split("\n")) {
    let line = "";
    for (const word of para.split(" ")) {
      let w = word;
      while (w.length > width) {
        if (line) {
          out.push(line);
          line = "";
        }
        out.push(w.slice(0, width));
        w = w.slice(width);
      }
      if (line === "") line = w;
      else if (line.length + 1 + w.length <= width) line += " " + w;
      else {
        out.push(line);
        line = w;
      }
    }
    out.push(line);
  }
  return out;
}

/** The status tag, padded to a fixed width: `[ok]  `, `[warn]`, `[FAIL]`, `[skip]`. */
export function statusTag(s: CheckStatus, color: boolean): string {
  const text = s === "fail" ? "FAIL" : s;
  const tag = `[${text}]`.padEnd(6);
  return color ? `${COLORS[s]}${tag}${RESET}` : tag;
}

/**
 * Renders one check: `[FAIL] title: found`, continuation lines indented by 7, then
 * `       fix: …` and the first details.
 */
export function renderCheck(c: CheckResult, o: RenderOptions): string[] {
  const width = o.width ?? 80;
  const indent = " ".repeat(7);
  const lines: string[] = [];
  // Check text quotes names from outside (pods, pools, files): controls are shown escaped.
  const head = wrap(visible(`${c.title}: ${c.found}`), width - 7);
  lines.push(`${statusTag(c.status, o.color)} ${head[0]}`);
  for (const l of head.slice(1)) lines.push(indent + l);
  const max = o.maxDetails ?? 5;
  const details = c.details ?? [];
  for (const d of details.slice(0, max)) {
    for (const [i, l] of wrap(visible(d), width - 9).entries()) {
      lines.push(indent + (i ? "  " : "- ") + l);
    }
  }
  if (details.length > max) lines.push(`${indent}  … and ${details.length - max} more (--json)`);
  if (c.fix && c.status !== "ok") {
    // "fix: " hangs over its continuation lines, so those wrap 5 columns narrower.
    for (const [i, l] of wrap(visible(c.fix), width - 12).entries()) {
      lines.push(indent + (i ? "     " : "fix: ") + l);
    }
  }
  return lines;
}

/** Renders the whole report with a summary line. */
export function renderReport(r: DoctorReport, o: RenderOptions): string {
  const width = o.width ?? 80;
  const lines: string[] = [];
  for (const n of r.notes) lines.push(...wrap(`note: ${visible(n)}`, width));
  for (const c of r.checks) lines.push(...renderCheck(c, o));
  const count = (s: CheckStatus) => r.checks.filter((c) => c.status === s).length;
  lines.push(
    `${count("ok")} ok, ${count("warn")} warn, ${count("fail")} fail, ${count("skip")} skipped` +
      ` (facts from ${r.source})`,
  );
  return lines.join("\n");
}

/** True when colours should be used on stdout: a TTY and NO_COLOR unset. */
export function useColor(): boolean {
  return Deno.stdout.isTerminal() && !Deno.env.get("NO_COLOR");
}

/**
 * Pads cells into an aligned text table that fits `width` columns. When it does not fit,
 * the columns listed in `shrink` (indexes, first shrunk first) are cut with "…"; ids that
 * people copy (ENI ids, IPs) should not be listed there.
 */
export function table(
  head: string[],
  cells: string[][],
  width = 80,
  shrink?: number[],
): string {
  // Cells hold names from outside (pods, namespaces, annotations): controls shown escaped.
  const rows = cells.map((r) => r.map((c) => visible(c ?? "")));
  const cols = head.length;
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const total = () => widths.reduce((a, b) => a + b, 0) + 2 * (cols - 1);
  for (const i of shrink ?? []) {
    while (total() > width && widths[i] > Math.max(4, head[i].length)) widths[i]--;
  }
  // Still too wide: shrink the widest columns.
  while (total() > width) {
    const i = widths.indexOf(Math.max(...widths));
    if (widths[i] <= 4) break;
    widths[i]--;
  }
  const cell = (s: string, i: number) =>
    (s.length > widths[i] ? s.slice(0, widths[i] - 1) + "…" : s).padEnd(widths[i]);
  const line = (r: string[]) => r.map((s, i) => cell(s ?? "", i)).join("  ").trimEnd();
  return [line(head), ...rows.map(line)].join("\n");
}
