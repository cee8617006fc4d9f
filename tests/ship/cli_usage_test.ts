/**
 * The operator CLI as a new user meets it: every `--help` fits a terminal and shows each
 * default in one style, and usage errors (unknown flag, missing value, unknown verb) exit 2
 * with a message that starts with the verb and names that verb's own `--help`.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { Command } from "commander";
import { run } from "../helpers/sh.ts";
import { buildProgram } from "../../cli/program.ts";

const main = new URL("../../main.ts", import.meta.url).pathname;

async function vpcni(args: string[]) {
  return await run(["deno", "run", "-A", "--quiet", main, ...args], {
    env: { ...Deno.env.toObject(), NO_COLOR: "1" },
  });
}

function allCommands(c: Command): Command[] {
  return [c, ...c.commands.flatMap(allCommands)];
}

function pathOf(c: Command): string {
  const names: string[] = [];
  for (let x: Command | null = c; x; x = x.parent) names.unshift(x.name());
  return names.join(" ");
}

Deno.test("every --help fits 80 columns and shows defaults as (default: value)", () => {
  const commands = allCommands(buildProgram());
  assert.ok(commands.length >= 13, "vpcni, its verbs and the doctor subcommands");
  for (const c of commands) {
    const help = c.helpInformation();
    for (const l of help.split("\n")) {
      assert.ok(l.length <= 80, `${pathOf(c)} --help: ${l.length} columns: ${l}`);
    }
    // One style across verbs: no quoted strings, no empty lists, no "(default X)".
    assert.doesNotMatch(help, /\(default: "|\(default: \[\]\)|\(default [^:]/, pathOf(c));
  }
});

Deno.test("doctor's flags show the defaults doctor uses", () => {
  const doctor = buildProgram().commands.find((c) => c.name() === "doctor")!;
  const help = doctor.helpInformation().replace(/\s+/g, " ");
  for (
    const d of [
      "default: 127.0.0.1:61679",
      "default: /var/lib/vpcni",
      "default: /etc/cni/net.d/10-vpcni.conflist",
      "default: /opt/cni/bin",
      "default: 3000",
    ]
  ) assert.ok(help.includes(d), `doctor --help lacks "${d}"`);
});

Deno.test("usage errors exit 2, start with the verb and point at its --help", async () => {
  const cases: [string[], RegExp][] = [
    [["--bogus"], /^vpcni: unknown option '--bogus'\n\(run 'vpcni --help' for usage\)/],
    [["doctr"], /^vpcni: unknown command 'doctr'\n\(Did you mean doctor\?\)/],
    [["version", "--bogus"], /^vpcni version: unknown option '--bogus'/],
    [
      ["doctor", "maxpods", "--instance-type", "m5.large", "--max-enis"],
      /^vpcni doctor maxpods: option '--max-enis <n>' argument missing\n.*'vpcni doctor maxpods --help'/,
    ],
    [["doctor", "limits"], /^vpcni doctor limits: required option '--instance-type <type>'/],
    [["sim"], /^vpcni sim: required option '--scenario <file>' not specified/],
  ];
  for (const [args, message] of cases) {
    const r = await vpcni(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stdout, "", `${args.join(" ")}: nothing on stdout`);
    assert.match(r.stderr, message);
  }
  const help = await vpcni(["doctor", "--help"]);
  assert.equal(help.code, 0, "--help is not an error");
});

Deno.test("vpcni --version and doctor help SUBCOMMAND answer as users expect", async () => {
  const v = await vpcni(["--version"]);
  assert.equal(v.code, 0, v.stderr);
  assert.match(v.stdout, /^\d+\.\d+\.\d+\n$/);
  const h = await vpcni(["doctor", "help", "maxpods"]);
  assert.equal(h.code, 0, h.stderr);
  assert.match(h.stdout, /^Usage: vpcni doctor maxpods/);
  const checks = await vpcni(["doctor", "--timeout", "5"]);
  assert.equal(checks.code, 2, "doctor without a subcommand still runs its checks' flags");
  assert.match(checks.stderr, /--timeout: "5" must be milliseconds/);
});
