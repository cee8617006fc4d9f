/**
 * The launcher `vpcni install` writes when run from source: it execs this Deno on the bundled
 * plugin for CNI verbs (`CNI_COMMAND` set) and on the checkout's main.ts otherwise, with the
 * permissions of the compiled build and the Deno cache named explicitly (kubelet runs plugins
 * from another directory with a bare environment).
 *
 * A runtime execs the plugin for every pod, so the launcher is a small static program when a
 * C compiler is at hand: it execs Deno with the exact argv, as the image's launcher does, and
 * no shell starts first. On x86-64 it needs no C library (its own `_start` and raw system
 * calls); elsewhere, or when that build fails, it is linked with the static C library. The
 * extra exec before Deno costs, measured here against exec'ing the target directly: ≈ 0.1–0.3
 * ms without the C library, ≈ 0.5 ms on static glibc, ≈ 0.6–0.9 ms through `/bin/sh`. Without
 * a compiler it is a `/bin/sh` script doing the same.
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

/**
 * The launcher program's C source for x86-64 without the C library: its own `_start` and raw
 * system calls, so the kernel maps one small file and nothing initialises a libc before the
 * exec (≈ 0.1 ms per process here, against ≈ 0.5 ms for the same program on static glibc).
 */
export function bareLauncherProgramSource(launch: SourceLaunch): string {
  const list = (args: readonly string[]) =>
    [launch.deno, ...args].map((a) => `  ${cString(a)},`).join("\n");
  return `/* vpcni ${VPCNI_VERSION} launcher, written by 'vpcni install' run from source (x86-64). */
static const char *const cni_args[] = {
${list(launch.cniArgs)}
  0,
};
static const char *const cli_args[] = {
${list(launch.cliArgs)}
  0,
};
static const char deno_dir[] = ${cString(`DENO_DIR=${launch.denoDir}`)};

#define MAX_ARGS 4096
#define MAX_ENV 4096
static char *args[MAX_ARGS];
static char *env[MAX_ENV];

static long sys3(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}

static int starts(const char *s, const char *prefix) {
  while (*prefix != 0) {
    if (*s++ != *prefix++) return 0;
  }
  return 1;
}

static void say(int fd, const char *s) {
  long n = 0;
  while (s[n] != 0) n++;
  sys3(1, fd, (long)s, n);
}

static void fail(int cni, const char *what, const char *why) {
  if (cni) {
    say(1, "{\\"cniVersion\\":\\"1.0.0\\",\\"code\\":999,\\"msg\\":\\"vpcni launcher: ");
    say(1, what);
    say(1, why);
    say(1, " (run vpcni install again)\\"}\\n");
  }
  say(2, "vpcni launcher: ");
  say(2, what);
  say(2, why);
  say(2, " (run vpcni install again)\\n");
  sys3(231, 127, 0, 0);
}

__attribute__((used)) void launch(long *sp) {
  long argc = sp[0];
  char **argv = (char **)(sp + 1);
  char **envp = argv + argc + 1;
  int cni = 0;
  long ne = 0;
  for (char **e = envp; *e != 0; e++) {
    if (starts(*e, "CNI_COMMAND=")) cni = 1;
    if (starts(*e, "DENO_DIR=")) continue;
    if (ne >= MAX_ENV - 2) fail(cni, "cannot start deno: ", "too many environment variables");
    env[ne++] = *e;
  }
  env[ne++] = (char *)deno_dir;
  env[ne] = 0;
  const char *const *base = cni ? cni_args : cli_args;
  long n = 0;
  while (base[n] != 0) {
    args[n] = (char *)base[n];
    n++;
  }
  for (long i = 1; i < argc; i++) {
    if (n >= MAX_ARGS - 1) fail(cni, "cannot start deno: ", "too many arguments");
    args[n++] = argv[i];
  }
  args[n] = 0;
  sys3(59, (long)args[0], (long)args, (long)env);
  fail(cni, "cannot run ", args[0]);
}

__asm__(".globl _start\\n_start:\\n  mov %rsp, %rdi\\n  and $-16, %rsp\\n  call launch\\n  hlt\\n");
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
 * stripped — without the C library on x86-64 (`bare`), else or when that fails with it — and
 * the `/bin/sh` script when no build succeeds. The same input gives the same bytes, so a
 * second install reports the launcher unchanged.
 */
export async function buildSourceLauncher(
  launch: SourceLaunch,
  opts: { bare?: boolean } = {},
): Promise<SourceLauncher> {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-launcher-" });
  try {
    const cc = Deno.env.get("CC") || "cc";
    const common = ["-Os", "-static", "-s", "-Wall", "-Werror", "-o", `${dir}/vpcni`];
    const builds: { source: string; flags: string[] }[] = [
      { source: launcherProgramSource(launch), flags: [] },
    ];
    if (opts.bare ?? Deno.build.arch === "x86_64") {
      builds.unshift({
        source: bareLauncherProgramSource(launch),
        flags: [
          "-nostdlib",
          "-ffreestanding",
          "-fno-builtin",
          "-fno-stack-protector",
          "-fno-tree-loop-distribute-patterns",
          "-fno-pie",
          "-no-pie",
        ],
      });
    }
    for (const { source, flags } of builds) {
      await Deno.writeTextFile(`${dir}/launcher.c`, source);
      let r;
      try {
        r = await new Deno.Command(cc, {
          args: [...common, ...flags, `${dir}/launcher.c`],
          stdout: "null",
          stderr: "null",
        }).output();
      } catch {
        break; // no compiler on this machine
      }
      if (r.success) return { bytes: await Deno.readFile(`${dir}/vpcni`), form: "program" };
    }
    return { bytes: new TextEncoder().encode(launcherScript(launch)), form: "script" };
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
