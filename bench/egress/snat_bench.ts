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
    count: { type: "string", default: "50000" },
    rounds: { type: "string", default: "5" },
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

const w = await EgressWorld.create("veth");
const results: Record<string, number[]> = {
  noRulesOnPrem: [],
  rulesOnPrem: [],
  noRulesNet: [],
  snatNet: [],
};
try {
  const net = w.internet;
  for (let i = 0; i < rounds; i++) {
    await net.setPublicSources([NODE_IP, POD_IP]);
    w.apply({ snat: "none" });
    results.noRulesOnPrem.push(await flood(w, net.onPremHost));
    results.noRulesNet.push(await flood(w, net.publicHost));
    await net.setPublicSources([NODE_IP]);
    w.apply({ snat: "node", excludeCidrs: ["192.0.2.0/24"] });
    results.rulesOnPrem.push(await flood(w, net.onPremHost));
    results.snatNet.push(await flood(w, net.publicHost));
  }
} finally {
  await w.close();
}
const m = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, median(v)]));
const row = (what: string, a: string, b: string) => {
  const ratios = results[b].map((x, i) => x / results[a][i]);
  console.log(
    `| ${what} | ${m[a].toFixed(1)} µs | ${m[b].toFixed(1)} µs | **${
      (m[b] / m[a]).toFixed(2)
    }×** (rounds ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}×) |`,
  );
};
const load = (await Deno.readTextFile("/proc/loadavg")).split(" ")[0];
console.log(
  `ping -f -c ${count}, ${rounds} rounds, medians of the time per ping; load ${load}`,
);
console.log("| path | no ruleset | ruleset | ratio |");
console.log("| ---- | ---------: | ------: | ----: |");
row("pod → excluded (on-premises) host: marks and lookups, no NAT", "noRulesOnPrem", "rulesOnPrem");
row("pod → internet host: SNAT to the node", "noRulesNet", "snatNet");
