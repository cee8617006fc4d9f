/**
 * `deno task bench [netlink] [cni] [sim] [egress] [ipam] [fleet]`: runs the benchmarks, each side by side
 * with its peer in one run, one after the other (never two at once: they would time each
 * other). With no names, runs them all. Each prints its own ratios; copy the figures into
 * bench/RESULTS.md with the command that produced them.
 *
 * @module
 */

const BENCHES: Record<
  string,
  { file: string; args: string[]; what: string; denoFlags?: string[] }
> = {
  netlink: {
    file: "bench/netlink/veth_bench.ts",
    args: [],
    what: "500 veth pairs created, addressed, deleted: netlink/ vs ip -batch",
  },
  cni: {
    file: "bench/cni/cni_bench.ts",
    args: [],
    what: "ADD+DEL of one pod and 50 concurrent ADDs: vpcni vs ptp + host-local",
  },
  sim: {
    file: "bench/sim/ec2_throughput.ts",
    args: [],
    what: "EC2 requests/s served by the simulator, beside moto_server",
  },
  egress: {
    file: "bench/egress/snat_bench.ts",
    args: [],
    what: "per-packet cost of the egress ruleset (SNAT, marks): ping flood with and without",
  },
  ipam: {
    file: "bench/ipam/ipam_bench.ts",
    args: [],
    what: "scale-up to max pods and churn: vpcni warm pools vs the AWS VPC CNI's policy",
  },
  fleet: {
    file: "bench/fleet/fleet_bench.ts",
    args: [],
    // A full collection before each memory reading, and room for 1,000 nodes' heaps.
    denoFlags: ["--v8-flags=--expose-gc,--max-old-space-size=4096"],
    what: "N nodes on one account's EC2 limits: vpcni node cores vs the AWS VPC CNI's policy",
  },
};

const root = new URL("..", import.meta.url).pathname;
const wanted = Deno.args.filter((a) => !a.startsWith("-"));
for (const name of wanted) {
  if (!Object.hasOwn(BENCHES, name)) {
    console.error(
      `bench: unknown benchmark "${name}"; choose from ${Object.keys(BENCHES).join(", ")}`,
    );
    Deno.exit(2);
  }
}
let failed = 0;
for (const [name, b] of Object.entries(BENCHES)) {
  if (wanted.length && !wanted.includes(name)) continue;
  const flags = b.denoFlags ?? [];
  console.log(
    `\n## ${name}: ${b.what}\n$ deno run -A ${[...flags, b.file, ...b.args].join(" ")}`.trimEnd(),
  );
  const { code } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", ...flags, `${root}${b.file}`, ...b.args],
    cwd: root,
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (code !== 0) {
    console.log(`bench ${name} exited ${code}`);
    failed++;
  }
}
Deno.exit(failed ? 1 : 0);
