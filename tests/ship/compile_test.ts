/**
 * `deno task compile` run as far as this machine allows: the real module graph, the real
 * type check and the real `deno compile` flag parsing, up to the point where denort is
 * needed. denort cannot be downloaded here, so the test checks that the build says exactly
 * how to provide it, and that a file that is not a denort is caught and removed.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  COMPILE_PERMISSIONS,
  compileArgs,
  DEFAULT_COMPILE,
  denortUrl,
} from "../../tools/compile.ts";
import { run } from "../helpers/sh.ts";

const repo = new URL("../..", import.meta.url).pathname;

async function compileTask(args: string[], env: Record<string, string>) {
  const cleanEnv: Record<string, string> = { ...Deno.env.toObject(), NO_COLOR: "1", ...env };
  if (env.DENORT_BIN === "") delete cleanEnv.DENORT_BIN;
  return await run(["deno", "run", "-A", "tools/compile.ts", ...args], {
    env: cleanEnv,
    cwd: repo,
  });
}

Deno.test("compile flags grant exactly what vpcni needs, never prompt, and embed the CLI", () => {
  const args = compileArgs(DEFAULT_COMPILE);
  for (
    const p of [
      "--allow-ffi",
      "--allow-net",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      "--allow-sys=osRelease,uid,homedir",
      "--no-prompt",
    ]
  ) {
    assert.ok(args.includes(p), `missing ${p} in ${args.join(" ")}`);
  }
  assert.ok(!args.includes("-A") && !args.includes("--allow-all"), "must not grant everything");
  assert.equal(COMPILE_PERMISSIONS.length, 8);
  const inc = args.indexOf("--include");
  assert.equal(args[inc + 1], "cli/program.ts", "main.ts imports the CLI by computed specifier");
  assert.deepEqual(args.slice(-3), ["--output", "dist/vpcni", "main.ts"]);
});

Deno.test("without denort the build checks graph and types, then says how to provide denort", async () => {
  const cache = `${Deno.env.get("HOME")}/.cache/deno/dl/release/v${Deno.version.deno}`;
  let cached = false;
  try {
    Deno.statSync(cache);
    cached = true;
  } catch { /* expected here */ }
  const out = await Deno.makeTempDir({ prefix: "vdr-compile-" });
  try {
    const r = await compileTask(["--output", `${out}/vpcni`], { DENORT_BIN: "" });
    if (cached || r.code === 0) {
      // denort was available after all: then the build must have produced a working binary.
      assert.equal(r.code, 0, r.stderr);
      const v = await run([`${out}/vpcni`, "version", "--json"]);
      assert.equal(JSON.parse(v.stdout).deno, Deno.version.deno);
      return;
    }
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /module graph ok \(\d+ modules from main\.ts, cli\/program\.ts/);
    assert.match(r.stderr, /type check ok/);
    assert.match(r.stderr, /--include cli\/program\.ts/);
    assert.ok(r.stderr.includes(`could not download denort from ${denortUrl()}`), r.stderr);
    assert.ok(r.stderr.includes("DENORT_BIN=/path/to/denort deno task compile"), r.stderr);
    assert.ok(r.stderr.includes(`denort ${Deno.version.deno}`), r.stderr);
    assert.throws(() => Deno.statSync(`${out}/vpcni`), "no half-built binary is left");
    assert.deepEqual([...Deno.readDirSync(out)].map((e) => e.name), [], "no temp file is left");
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("a DENORT_BIN that does not exist is refused by name before building", async () => {
  const out = await Deno.makeTempDir({ prefix: "vdr-compile-" });
  try {
    const r = await compileTask(["--no-check", "--output", `${out}/vpcni`], {
      DENORT_BIN: `${out}/no-such-denort`,
    });
    assert.equal(r.code, 1);
    assert.ok(r.stderr.includes(`DENORT_BIN=${out}/no-such-denort: no such file`), r.stderr);
    assert.doesNotMatch(r.stderr, /module graph ok/, "refused before any work");
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});

Deno.test("a DENORT_BIN that is not a denort is built on, caught by running it, and removed", async () => {
  const out = await Deno.makeTempDir({ prefix: "vdr-compile-" });
  try {
    // `deno compile` appends the program to whatever file it is given without looking;
    // /bin/true stands for a wrong download (a denort of another version behaves alike).
    await Deno.copyFile("/bin/true", `${out}/denort`);
    await Deno.chmod(`${out}/denort`, 0o755);
    const r = await compileTask(["--no-check", "--output", `${out}/vpcni`], {
      DENORT_BIN: `${out}/denort`,
    });
    assert.equal(r.code, 1, r.stderr);
    // deno compile accepted every flag and embedded the program (the real compile ran).
    assert.match(r.stderr, /deno compile --allow-ffi .* --include cli\/program\.ts/);
    assert.match(r.stderr, /does not run as vpcni on Deno/);
    assert.match(r.stderr, /Removed it/);
    assert.throws(() => Deno.statSync(`${out}/vpcni`));
  } finally {
    await Deno.remove(out, { recursive: true });
  }
});
