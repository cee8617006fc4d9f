/**
 * The per-packet cost of vpcni's egress ruleset: a ping flood (`ping -f -c N`, iputils from
 * Debian) from a veth pod on the simulator's fabric, with the ruleset and without, side by
 * side in one run, in netns this bench creates (tests/helpers/egress_world.ts) and removes.
 *
 * - excluded destination: the on-premises host, reached with the pod's address either way;
 *   with the ruleset every packet is marked/looked up but not NATed;
 * - SNAT: the internet host; without the ruleset the bench lets the internet gateway carry
 *   the pod's own address, with it the packets are SNATed to the node's.
 *
 * Three setups of the node: no rules at all; conntrack only (an empty nat chain, as any node
 * running kube-proxy has); vpcni's ruleset. The ruleset turns conntrack on by itself, so
 * "vpcni / conntrack only" is its cost on a real node.
 *
 * Usage: deno run -A bench/egress/snat_bench.ts [--count N] [--rounds R]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { EgressWorld, NODE_IP, POD_IP } from "../../tests/helpers/egress_world.ts";
import { run } from "../../tests/helpers/sh.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string", default: "20000" },
    rounds: { type: "string", default: "9" },
  },
});
const count = Number(values.count);
const rounds = Number(values.rounds);

/**
 * Time per ping in µs of a flood of `count` pings (ping's total time over the count: each
 * ping goes out when the last reply is in, and the total has more digits than its rtt).
 */
async function flood(w: EgressWorld, to: string): Promise<number> {
  const r = await run(["ping", "-q", "-f", "-c", String(count), "-W", "1", to], {
    netns: w.pod.name,
  });
  const loss = /(\d+(?:\.\d+)?)% packet loss/.exec(r.stdout);
  const time = /, time (\d+)ms/.exec(r.stdout);
  if (!loss || !time || Number(loss[1]) > 1) {
    throw new Error(`ping to ${to} failed:\n${r.stdout}${r.stderr}`);
  }
  return Number(time[1]) * 1000 / count;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The node's state for one measurement. */
type Setup = "bare" | "conntrack" | "vpcni";
const SETUPS: Setup[] = ["bare", "conntrack", "vpcni"];
const CT_ONLY = "table ip ctonly { chain pre { type nat hook prerouting priority dstnat; }; }\n";

async function setUp(w: EgressWorld, s: Setup): Promise<void> {
  await run(["nft", "delete", "table", "ip", "ctonly"], { netns: w.node.name });
  if (s === "vpcni") {
    await w.internet.setPublicSources([NODE_IP]);
    w.apply({ snat: "node", excludeCidrs: ["192.0.2.0/24"] });
    return;
  }
  // Without SNAT the bench lets the gateway carry the pod's own address, for a baseline.
  await w.internet.setPublicSources([NODE_IP, POD_IP]);
  w.apply({ snat: "none" });
  if (s === "conntrack") {
    const r = await run(["nft", "-f", "-"], { netns: w.node.name, stdin: CT_ONLY });
    if (r.code !== 0) throw new Error(r.stderr);
  }
}

const w = await EgressWorld.create("veth");
const onPrem: Record<Setup, number[]> = { bare: [], conntrack: [], vpcni: [] };
const net: Record<Setup, number[]> = { bare: [], conntrack: [], vpcni: [] };
try {
  for (let i = 0; i < rounds; i++) {
    // Rotate the order each round, so a drift in the machine's load hits every setup alike.
    for (let k = 0; k < SETUPS.length; k++) {
      const s = SETUPS[(i + k) % SETUPS.length];
      await setUp(w, s);
      onPrem[s].push(await flood(w, w.internet.onPremHost));
      net[s].push(await flood(w, w.internet.publicHost));
    }
  }
} finally {
  await w.close();
}
const load = (await Deno.readTextFile("/proc/loadavg")).split(" ")[0];
console.log(
  `ping -f -c ${count}, ${rounds} rounds, medians of the time per ping (µs); load ${load}`,
);
console.log(
  "| destination | no rules | conntrack only | vpcni ruleset | vpcni / no rules | vpcni / conntrack only |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
for (
  const [what, r] of [["excluded (on-premises) host: marks, lookups, no NAT", onPrem], [
    "internet host: SNAT to the node",
    net,
  ]] as const
) {
  const m = (s: Setup) => median(r[s]);
  const ratio = (a: Setup, b: Setup) => {
    const per = r[a].map((x, i) => x / r[b][i]);
    return `**${(m(a) / m(b)).toFixed(2)}×** (${Math.min(...per).toFixed(2)}–${
      Math.max(...per).toFixed(2)
    })`;
  };
  console.log(
    `| ${what} | ${m("bare").toFixed(1)} | ${m("conntrack").toFixed(1)} | ${
      m("vpcni").toFixed(1)
    } | ${ratio("vpcni", "bare")} | ${ratio("vpcni", "conntrack")} |`,
  );
}
