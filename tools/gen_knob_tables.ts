/**
 * Writes the knob table of README.md and ipam/README.md from `KNOBS` (ipam/knobs.ts), so
 * the documentation and `vpcni serve --list-knobs` never disagree. The table is the block of
 * lines starting with `| knob` up to the first line that is not a table row.
 *
 *   deno run -A tools/gen_knob_tables.ts           rewrite both tables
 *   deno run -A tools/gen_knob_tables.ts --check   exit 1 naming a stale file
 *
 * @module
 */
import { type KnobDoc, KNOBS } from "../ipam/knobs.ts";

/** The READMEs that carry the knob table, relative to the repository root. */
export const KNOB_TABLE_FILES = ["README.md", "ipam/README.md"];

function cell(text: string): string {
  return text.replaceAll("|", "\\|");
}

/** Renders the knob table as aligned Markdown rows (what `deno fmt` would produce). */
export function renderKnobTable(knobs: readonly KnobDoc[]): string[] {
  const rows = [
    ["knob", "default", "env", "flag", "meaning"],
    ...knobs.map((k) => [
      `\`${k.knob}\``,
      cell(k.def),
      k.env ? `\`${k.env}\`` : "",
      k.flag ? `\`${k.flag}\`` : "",
      cell(k.doc),
    ]),
  ];
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
  const lines = text.split("\n");
  const start = lines.findIndex((l) => /^\| knob +\| default/.test(l));
  if (start < 0) throw new Error(`${file}: no knob table (a line starting "| knob | default")`);
  let end = start;
  while (end < lines.length && lines[end].startsWith("|")) end++;
  return [...lines.slice(0, start), ...renderKnobTable(knobs), ...lines.slice(end)].join("\n");
}

if (import.meta.main) {
  const check = Deno.args.includes("--check");
  const root = new URL("../", import.meta.url);
  let stale = 0;
  for (const file of KNOB_TABLE_FILES) {
    const url = new URL(file, root);
    const text = await Deno.readTextFile(url);
    const next = replaceKnobTable(text, KNOBS, file);
    if (next === text) continue;
    if (check) {
      console.error(`${file}: the knob table is stale; run deno run -A tools/gen_knob_tables.ts`);
      stale++;
    } else {
      await Deno.writeTextFile(url, next);
      console.error(`wrote ${file}`);
    }
  }
  Deno.exit(stale ? 1 : 0);
}
