/*
 * vpcni's launcher: the file installed as /opt/cni/bin/vpcni (and as /usr/local/bin/vpcni in
 * the image) when vpcni ships as the Deno runtime plus its bundled JavaScript rather than as
 * one compiled executable. It execs
 *
 *     <its own dir>/<runtime dir>/deno run <flags> <program> <its own arguments>
 *
 * where <program> is the plugin alone (vpcni-plugin.js) when CNI_COMMAND is set, i.e. when a
 * container runtime calls a CNI verb, and the whole program (vpcni.js) otherwise.
 *
 * Why a program and not a script: the image has no shell (nor do hosts like Bottlerocket),
 * and a "#!" line passes the interpreter at most one argument. Built statically, it needs no
 * library of the host.
 *
 * The runtime dir and the flags are not compiled in. tools/image.ts and `vpcni install`
 * write them into the STAMP block below (see cli/runtime_launcher.ts), so one build serves
 * every version and the launcher of one version differs from the next in that block only.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STAMP_SIZE 2048
#define MARKER "@@VPCNI-LAUNCHER-STAMP@@"
#define MAX_FLAGS 64

/*
 * The marker, then NUL-terminated strings: the runtime dir (relative to this file's dir),
 * then each deno flag; an empty string ends the list. volatile: the compiler must read the
 * bytes at run time, not fold the unstamped string into the code.
 */
static volatile const char stamp[STAMP_SIZE] = MARKER;

/* Says why the launch failed; as the CNI error JSON on stdout when a runtime called us. */
static int fail(const char *what, const char *path, const char *why) {
  if (getenv("CNI_COMMAND") != NULL) {
    printf("{\"cniVersion\":\"1.0.0\",\"code\":999,\"msg\":\"vpcni launcher: %s %s: %s "
           "(run vpcni install again)\"}\n", what, path, why);
  }
  fprintf(stderr, "vpcni launcher: %s %s: %s (run vpcni install again)\n", what, path, why);
  return 127;
}

int main(int argc, char **argv) {
  static char block[STAMP_SIZE];
  for (int i = 0; i < STAMP_SIZE; i++) block[i] = stamp[i];
  block[STAMP_SIZE - 2] = block[STAMP_SIZE - 1] = '\0';
  char *p = block + strlen(MARKER) + 1;
  if (*p == '\0') return fail("not stamped with", "a runtime directory", "a build error");
  const char *runtime = p;
  p += strlen(p) + 1;
  char *flags[MAX_FLAGS];
  int nflags = 0;
  while (*p != '\0' && nflags < MAX_FLAGS) {
    flags[nflags++] = p;
    p += strlen(p) + 1;
  }

  /* Our own directory: from the kernel, else from argv[0] (a chroot without /proc). */
  static char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
  } else if (argv[0] != NULL && strchr(argv[0], '/') != NULL) {
    strncpy(self, argv[0], sizeof self - 1);
  } else {
    return fail("cannot find", "its own path", "no /proc/self/exe and a bare argv[0]");
  }
  *strrchr(self, '/') = '\0';

  static char deno[PATH_MAX], program[PATH_MAX];
  const char *which = getenv("CNI_COMMAND") != NULL ? "vpcni-plugin.js" : "vpcni.js";
  if (snprintf(deno, sizeof deno, "%s/%s/deno", self, runtime) >= (int)sizeof deno ||
      snprintf(program, sizeof program, "%s/%s/%s", self, runtime, which) >=
          (int)sizeof program) {
    return fail("cannot use", self, "path too long");
  }

  char **args = calloc((size_t)argc + (size_t)nflags + 4, sizeof *args);
  if (args == NULL) return fail("cannot start", deno, strerror(ENOMEM));
  int k = 0;
  args[k++] = deno;
  args[k++] = "run";
  for (int i = 0; i < nflags; i++) args[k++] = flags[i];
  args[k++] = program;
  for (int i = 1; i < argc; i++) args[k++] = argv[i];
  args[k] = NULL;
  execv(deno, args);
  return fail("cannot run", deno, strerror(errno));
}
