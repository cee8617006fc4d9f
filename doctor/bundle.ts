/**
 * `doctor bundle -o FILE`: everything needed to diagnose the node elsewhere, in one tar.gz:
 * doctor's own report, the conflist and daemon config, the checkpoint, the daemon's
 * introspection and metrics, link/address/route/rule/neighbour dumps of the host and of
 * each pod netns, sysctls, and the tail of recent logs. Credentials are redacted from every
 * file before it is archived.
 *
 * @module
 */
import { CHECKPOINT_FILE } from "../ipam/checkpoint.ts";
import { versionInfo } from "../base/version.ts";
import type { DoctorOptions, Facts } from "./facts.ts";
import { fileKind, hostSysctlKeys, readSysctls, snapshotNetns } from "./kernel.ts";
import type { DoctorReport } from "./report.ts";
import { type TarFile, tarGz } from "./tar.ts";
import { redactJson, redactText } from "./redact.ts";

export { redactJson, redactText } from "./redact.ts";

function json(name: string, v: unknown): TarFile {
  return { name, data: JSON.stringify(redactJson(v), null, 2) + "\n" };
}

async function text(name: string, path: string, maxBytes = 1 << 20): Promise<TarFile | undefined> {
  try {
    // A FIFO (or a device) would block the read for ever: only regular files are copied.
    const info = await Deno.stat(path);
    if (!info.isFile) {
      return { name: `${name}.skipped.txt`, data: `${path} is ${fileKind(info)}\n` };
    }
    const f = await Deno.open(path, { read: true });
    try {
      const size = (await f.stat()).size;
      if (size > maxBytes) await f.seek(size - maxBytes, Deno.SeekMode.Start);
      const buf = new Uint8Array(Math.min(size, maxBytes));
      let n = 0;
      while (n < buf.length) {
        const r = await f.read(buf.subarray(n));
        if (r === null) break;
        n += r;
      }
      return { name, data: redactText(new TextDecoder().decode(buf.subarray(0, n))) };
    } finally {
      f.close();
    }
  } catch {
    return undefined;
  }
}

async function journal(unit: string): Promise<string | undefined> {
  try {
    const out = await new Deno.Command("journalctl", {
      args: ["-u", unit, "--since", "-2h", "--no-pager", "-o", "short-iso", "-n", "5000"],
      stdout: "piped",
      stderr: "null",
      signal: AbortSignal.timeout(10_000),
    }).output();
    return out.success ? new TextDecoder().decode(out.stdout) : undefined;
  } catch {
    return undefined;
  }
}

/** Log files worth including: the plugin's logFile from the conflist, and /var/log/vpcni. */
function logPaths(conflistFile: string): string[] {
  const paths = new Set<string>();
  try {
    const list = JSON.parse(Deno.readTextFileSync(conflistFile)) as {
      plugins?: Record<string, unknown>[];
    };
    for (const p of list.plugins ?? []) {
      // A plugin's own log and its IPAM's may both be set; both are copied.
      for (const lf of [p.logFile, (p.ipam as Record<string, unknown> | undefined)?.logFile]) {
        if (typeof lf === "string") paths.add(lf);
      }
    }
  } catch { /* no conflist */ }
  try {
    for (const e of Deno.readDirSync("/var/log/vpcni")) {
      if (e.isFile) paths.add(`/var/log/vpcni/${e.name}`);
    }
  } catch { /* no log dir */ }
  return [...paths];
}

/** Collects the bundle's files. */
export async function bundleFiles(
  o: DoctorOptions,
  f: Facts,
  report: DoctorReport,
): Promise<TarFile[]> {
  const files: TarFile[] = [];
  const add = (x: TarFile | undefined) => x && files.push(x);
  const env = Object.fromEntries(
    Object.entries(Deno.env.toObject()).filter(([k]) => /^(VPCNI_|AWS_|CNI_|DENO_)/.test(k)),
  );
  files.push(json("meta.json", {
    createdAt: new Date().toISOString(),
    // Read from /proc: Deno.hostname() would need a sys permission the build does not grant.
    hostname: await Deno.readTextFile("/proc/sys/kernel/hostname").then((h) => h.trim(), () => "?"),
    vpcni: versionInfo(),
    factsFrom: f.source,
    options: o,
    environment: env,
  }));
  files.push(json("doctor/report.json", report));
  add(await text("config/conflist.json", o.conflistFile));
  if (o.configFile) add(await text("config/daemon-config.yaml", o.configFile));
  files.push(json("config/daemon-config-effective.json", f.config));
  add(await text("state/checkpoint.json", `${o.stateDir}/${CHECKPOINT_FILE}`));
  if (f.source === "daemon") {
    files.push(json("daemon/pools.json", f.pools));
    files.push(json("daemon/enis.json", f.enis));
    files.push(json("daemon/allocations.json", f.allocations));
    files.push(json("daemon/cooldowns.json", f.cooldowns));
    files.push(json("daemon/routed-unknown.json", f.routedUnknown));
    if (f.metrics) files.push({ name: "daemon/metrics.txt", data: f.metrics });
  }
  files.push(json("daemon/status.json", f.daemon));
  if (f.metadata) files.push(json("aws/imds.json", f.metadata));
  try {
    const host = snapshotNetns(o.hostNetns);
    files.push(json("kernel/host.json", host));
    files.push(json("kernel/sysctls.json", readSysctls(hostSysctlKeys(host.links), o.hostNetns)));
  } catch (e) {
    files.push({ name: "kernel/host.error.txt", data: String(e) });
  }
  const seen = new Set<string>();
  for (const a of f.allocations) {
    if (!a.netns || seen.has(a.netns)) continue;
    seen.add(a.netns);
    const label = a.netns.replace(/^.*\//, "").replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 80);
    try {
      files.push(
        json(`kernel/pods/${label}.json`, { allocation: a, snapshot: snapshotNetns(a.netns) }),
      );
    } catch (e) {
      files.push({ name: `kernel/pods/${label}.error.txt`, data: String(e) });
    }
  }
  for (const p of logPaths(o.conflistFile)) {
    add(await text(`logs/${p.replace(/^\//, "").replace(/\//g, "_")}`, p));
  }
  const j = await journal("vpcni");
  if (j) files.push({ name: "logs/journal-vpcni.txt", data: redactText(j) });
  return files;
}

/** Writes the bundle to `path` (atomically: temp file, then rename) and returns its files. */
export async function writeBundle(path: string, files: TarFile[]): Promise<void> {
  const tmp = `${path}.tmp-${Deno.pid}`;
  try {
    await Deno.writeFile(tmp, tarGz(files), { mode: 0o600 });
    await Deno.rename(tmp, path);
  } catch (e) {
    // a failed bundle leaves nothing behind
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
}
