/**
 * The launcher `vpcni install` writes when run from source: it execs this Deno on the bundled
 * plugin for CNI verbs (`CNI_COMMAND` set) and on the checkout's main.ts otherwise, with the
 * permissions of the compiled build and the Deno cache named explicitly (kubelet runs plugins
 * from another directory with a bare environment).
 *
 * A runtime execs the plugin for every pod, so the launcher is a small static program when a
 * C compiler is at hand: it execs Deno with the exact argv, as the image's launcher does, and
 * no shell starts first (a `/bin/sh` script costs ≈ 0.9 ms of CPU and wall time per process
 * here, against ≈ 0.2 ms for the static program). Without a compiler (or the static C
 * library) it is a `/bin/sh` script doing the same.
 *
 * @module
 */
import { VPCNI_VERSION } from "../base/version.ts";

/** What the from-source launcher runs. */
export interface SourceLaunch {
  /** This Deno. */
  deno: string;
  /** The Deno cache the launcher sets (`DENO_DIR`). */
  denoDir: string;
  /** `deno` arguments for CNI verbs, before the launcher's own arguments. */
  cniArgs: readonly string[];
  /** `deno` arguments for everything else, before the launcher's own arguments. */
  cliArgs: readonly string[];
}

/** The launcher's bytes and which form it took. */
export interface SourceLauncher {
  bytes: Uint8Array;
  /** `program`: a static executable; `script`: a `/bin/sh` script (no C compiler here). */
  form: "program" | "script";
}

/** A C string literal of `s`: every byte outside plain ASCII letters and digits escaped. */
function cString(s: string): string {
  let out = '"';
  for (const b of new TextEncoder().encode(s)) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9 ./_=,:+-]/.test(c) ? c : `\\${b.toString(8).padStart(3, "0")}`;
  }
  return `${out}"`;
}

/** The launcher program's C source for `launch`. */
export function launcherProgramSource(launch: SourceLaunch): string {
  const list = (args: readonly string[]) =>
    [launch.deno, ...args].map((a) => `  ${cString(a)},`).join("\n");
  return `/* vpcni ${VPCNI_VERSION} launcher, written by 'vpcni install' run from source. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const cni_args[] = {
${list(launch.cniArgs)}
  0,
};
static const char *const cli_args[] = {
${list(launch.cliArgs)}
  0,
};

int main(int argc, char **argv) {
  const int cni = getenv("CNI_COMMAND") != NULL;
  const char *const *base = cni ? cni_args : cli_args;
  size_t n = 0;
  while (base[n] != NULL) n++;
  char **args = calloc(n + (size_t)argc, sizeof *args);
  if (args != NULL && setenv("DENO_DIR", ${cString(launch.denoDir)}, 1) == 0) {
    for (size_t i = 0; i < n; i++) args[i] = (char *)base[i];
    for (int i = 1; i < argc; i++) args[n + (size_t)i - 1] = argv[i];
    execv(base[0], args);
  }
  const char *why = strerror(errno);
  if (cni) {
    printf("{\\"cniVersion\\":\\"1.0.0\\",\\"code\\":999,\\"msg\\":\\"vpcni launcher: cannot run "
           "%s: %s (run vpcni install again)\\"}\\n", base[0], why);
  }
  fprintf(stderr, "vpcni launcher: cannot run %s: %s (run vpcni install again)\\n", base[0], why);
  return 127;
}
`;
}

/** The launcher as a `/bin/sh` script, for a machine without a C compiler. */
export function launcherScript(launch: SourceLaunch): string {
  const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const line = (args: readonly string[]) =>
    `DENO_DIR=${q(launch.denoDir)} exec ${[launch.deno, ...args].map(q).join(" ")} "$@"`;
  return [
    "#!/bin/sh",
    `# vpcni ${VPCNI_VERSION} launcher, written by 'vpcni install' run from source.`,
    "# A compiled vpcni (deno task compile) installs itself here instead of this script.",
    "# CNI verbs run the plugin as bundled at install time (run the install again after",
    "# changing the checkout); everything else runs the checkout's main.ts.",
    'if [ -n "${CNI_COMMAND+set}" ]; then',
    `  ${line(launch.cniArgs)}`,
    "fi",
    line(launch.cliArgs),
    "",
  ].join("\n");
}

/**
 * Builds the launcher program with the C compiler (`CC`, else `cc`), statically linked and
 * stripped; the `/bin/sh` script when that fails. The same input gives the same bytes, so a
 * second install reports the launcher unchanged.
 */
export async function buildSourceLauncher(launch: SourceLaunch): Promise<SourceLauncher> {
  const script = {
    bytes: new TextEncoder().encode(launcherScript(launch)),
    form: "script" as const,
  };
  const dir = await Deno.makeTempDir({ prefix: "vpcni-launcher-" });
  try {
    await Deno.writeTextFile(`${dir}/launcher.c`, launcherProgramSource(launch));
    const cc = Deno.env.get("CC") || "cc";
    let r;
    try {
      r = await new Deno.Command(cc, {
        args: [
          "-Os",
          "-static",
          "-s",
          "-Wall",
          "-Werror",
          "-o",
          `${dir}/vpcni`,
          `${dir}/launcher.c`,
        ],
        stdout: "null",
        stderr: "null",
      }).output();
    } catch {
      return script; // no compiler on this machine
    }
    if (!r.success) return script;
    return { bytes: await Deno.readFile(`${dir}/vpcni`), form: "program" };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
