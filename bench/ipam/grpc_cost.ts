/**
 * What turning the device plugin on costs the daemon: the time to load ipam/kubelet/link.ts
 * (with `@grpc/grpc-js` and node:http2) into a process that already holds the daemon's
 * modules, and the RSS it adds after a full collection. Runs `runs` fresh processes.
 *
 *     deno run -A bench/ipam/grpc_cost.ts [runs]
 *
 * @module
 */

const runs = Number(Deno.args[0] ?? 5);
const probe = `
const gc = (globalThis as { gc?: () => void }).gc!;
await import(${JSON.stringify(new URL("../../ipam/daemon.ts", import.meta.url).href)});
gc();
const rss0 = Deno.memoryUsage().rss;
const t0 = performance.now();
await import(${JSON.stringify(new URL("../../ipam/kubelet/link.ts", import.meta.url).href)});
const ms = performance.now() - t0;
gc();
console.log(JSON.stringify({ ms, mib: (Deno.memoryUsage().rss - rss0) / 2 ** 20 }));
`;
const file = await Deno.makeTempFile({
  suffix: ".ts",
  dir: new URL(".", import.meta.url).pathname,
});
try {
  await Deno.writeTextFile(file, probe);
  const rows: { ms: number; mib: number }[] = [];
  for (let i = 0; i < runs; i++) {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-check", "--v8-flags=--expose-gc", file],
      stdout: "piped",
      stderr: "inherit",
    }).output();
    rows.push(JSON.parse(new TextDecoder().decode(out.stdout)));
  }
  const med = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(
    `load ms: ${rows.map((r) => r.ms.toFixed(1)).join(" ")} (median ${
      med(rows.map((r) => r.ms)).toFixed(1)
    })`,
  );
  console.log(
    `RSS added MiB: ${rows.map((r) => r.mib.toFixed(1)).join(" ")} (median ${
      med(rows.map((r) => r.mib)).toFixed(1)
    })`,
  );
} finally {
  await Deno.remove(file);
}
