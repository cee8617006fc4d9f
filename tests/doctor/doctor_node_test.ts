/**
 * `vpcni doctor` against a whole node built from real parts (simulator + fabric, `vpcni
 * serve`, the plugin installed by `vpcni install`, pods added by cnitool), breaking one
 * thing at a time on purpose and checking that doctor reports it as FAIL with the fix an
 * operator needs: a deleted rule, a full subnet, a leaked ENI, a broken conflist, a stopped
 * daemon. Orphans are repaired by `doctor datapath --fix`, and only they.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Ec2Client } from "../../aws/ec2.ts";
import type { CheckResult, DoctorReport } from "../../doctor/report.ts";
import {
  DOCTOR_CLUSTER,
  DOCTOR_SUBNETS,
  type DoctorNode,
  startDoctorNode,
} from "../helpers/doctor_node.ts";
import { run, sh } from "../helpers/sh.ts";
import { vpcniArgv } from "../helpers/vpcni_cli.ts";

async function report(
  node: DoctorNode,
  extra: string[] = [],
): Promise<{ code: number; r: DoctorReport; text: string }> {
  const j = await node.doctor(["--json", "--kubelet-max-pods", "40", ...extra]);
  let r: DoctorReport;
  try {
    r = JSON.parse(j.stdout);
  } catch {
    throw new Error(`doctor --json printed no JSON (exit ${j.code}): ${j.stdout}\n${j.stderr}`);
  }
  return { code: j.code, r, text: j.stdout };
}

function check(r: DoctorReport, id: string): CheckResult {
  const c = r.checks.find((x) => x.id === id);
  assert.ok(c, `no check ${id} in ${r.checks.map((x) => x.id).join(", ")}`);
  return c;
}

function failing(r: DoctorReport): string[] {
  return r.checks.filter((c) => c.status === "fail").map((c) => `${c.id}: ${c.found}`);
}

Deno.test({
  name: "doctor reports each broken part of a real node as FAIL with its fix",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    Deno.env.set("AWS_ACCESS_KEY_ID", "test");
    Deno.env.set("AWS_SECRET_ACCESS_KEY", "test");
    const node = await startDoctorNode();
    const ec2 = new Ec2Client({
      region: "us-east-1",
      endpoint: node.sim.ec2Endpoint,
      maxAttempts: 1,
    });
    try {
      const p1 = await node.addPod();
      const p2 = await node.addPod();

      await t.step("a healthy node: no check fails, exit 0, text fits 80 columns", async () => {
        const { code, r } = await report(node);
        assert.deepEqual(failing(r), [], JSON.stringify(r, null, 2));
        assert.equal(code, 0);
        assert.equal(r.source, "daemon");
        for (
          const id of [
            "daemon",
            "imds",
            "ec2-permissions",
            "limits",
            "pools",
            "datapath",
            "consistency",
            "leaked-enis",
            "cni-config",
          ]
        ) {
          assert.equal(check(r, id).status, "ok", `${id}: ${check(r, id).found}`);
        }
        assert.match(check(r, "consistency").found, /2 allocation\(s\) agree/);
        const text = await node.doctor(["--kubelet-max-pods", "40"]);
        assert.equal(text.code, 0, text.stdout);
        for (const line of text.stdout.split("\n")) {
          assert.ok(line.length <= 80, `too wide: ${line}`);
        }
        assert.doesNotMatch(
          text.stdout,
          new RegExp("\u001b\\["),
          "no colours when stdout is not a TTY",
        );
        assert.match(text.stdout, /^\[ok\] {3}daemon: healthy and ready/m);
      });

      await t.step("doctor pods, enis and subnets show the allocations", async () => {
        const pods = await node.doctor(["pods"]);
        assert.equal(pods.code, 0, pods.stderr);
        assert.match(pods.stdout, new RegExp(`\\b${p1.ip.replaceAll(".", "\\.")}\\b`));
        assert.match(pods.stdout, new RegExp(`\\b${p2.ip.replaceAll(".", "\\.")}\\b`));
        const enis = JSON.parse((await node.doctor(["enis", "--json"])).stdout) as {
          pool: string;
          used: number;
        }[];
        assert.equal(
          enis.filter((e) => e.pool === "default").reduce((n, e) => n + e.used, 0),
          node.pods.length,
        );
        const subnets = await node.doctor(["subnets"]);
        assert.match(
          subnets.stdout,
          new RegExp(
            `${DOCTOR_SUBNETS.internal}\\s+10\\.60\\.1\\.0/24\\s+us-east-1a\\s+\\d+\\s+default`,
          ),
        );
      });

      await t.step(
        "kubelet max pods above the addresses: limits FAIL gives the number",
        async () => {
          const { code, r } = await report(node, ["--kubelet-max-pods", "58"]);
          assert.equal(code, 1);
          const l = check(r, "limits");
          assert.equal(l.status, "fail");
          // Every pool starts at device index 1: 3 ENIs × 14 + 2.
          assert.match(l.found, /kubelet --max-pods=58 but m5\.xlarge addresses allow 44/);
          assert.match(
            l.fix ?? "",
            /set kubelet --max-pods=44 \(vpcni doctor maxpods --instance-type m5\.xlarge --exclude-primary-eni\)/,
          );
        },
      );

      await t.step(
        "IMDS unreachable: IMDSv2 FAIL with the fix, and limits are skipped",
        async () => {
          const dead = Deno.listen({ hostname: "127.0.0.1", port: 0 });
          const port = (dead.addr as Deno.NetAddr).port;
          dead.close();
          const { code, r } = await report(node, [
            "--imds-endpoint",
            `http://127.0.0.1:${port}`,
            "--timeout",
            "500",
          ]);
          assert.equal(code, 1);
          const i = check(r, "imds");
          assert.equal(i.status, "fail");
          assert.match(i.found, new RegExp(`unreachable: IMDS http://127\\.0\\.0\\.1:${port}`));
          assert.match(i.fix ?? "", /HttpPutResponseHopLimit >= 2/);
          assert.equal(check(r, "limits").status, "skip");
        },
      );

      await t.step("EC2 throttling: a warning with the API-budget hint", async () => {
        // Every EC2 call is throttled until reset. The ADD takes a warm address (no EC2
        // call); the warm loop's refill after it is what gets throttled.
        node.sim.faults.throttleProbability = 1;
        try {
          await node.addPod();
          const until = Date.now() + 20_000;
          let throttles = 0;
          while (Date.now() < until && throttles === 0) {
            const m = await fetch(`http://127.0.0.1:${node.port}/metrics`).then((x) => x.text());
            throttles = Number(/^vpcni_ec2_throttles_total (\d+)/m.exec(m)?.[1] ?? "0");
            await new Promise((res) => setTimeout(res, 200));
          }
          assert.ok(throttles > 0, "the daemon saw no throttling");
        } finally {
          node.sim.faults.throttleProbability = 0;
        }
        const { r } = await report(node);
        const th = check(r, "throttling");
        assert.equal(th.status, "warn");
        assert.match(th.found, /^[1-9]\d* throttled of \d+ EC2 calls/);
        assert.match(th.fix ?? "", /per account and region/);
      });

      await t.step(
        "delete a rule: datapath FAIL names the rule and says to recreate the pod",
        async () => {
          await sh(
            ["ip", "rule", "del", "priority", "1000", "to", `${p1.ip}/32`, "lookup", "main"],
            { netns: node.node.name },
          );
          try {
            const { code, r } = await report(node);
            assert.equal(code, 1);
            const dp = check(r, "datapath");
            assert.equal(dp.status, "fail");
            assert.ok(
              dp.details?.some((d) => d.includes(`rule 1000: to ${p1.ip}/32 lookup main missing`)),
              JSON.stringify(dp.details),
            );
            assert.ok(!dp.details?.some((d) => d.includes(p2.ip)), "the other pod is complete");
            assert.match(dp.fix ?? "", /recreate the affected pods/);
          } finally {
            await sh([
              "ip",
              "rule",
              "add",
              "priority",
              "1000",
              "to",
              `${p1.ip}/32`,
              "lookup",
              "main",
            ], { netns: node.node.name });
          }
          // Inside the pod too: its default route via the link-local gateway.
          await sh(["ip", "route", "del", "default"], { netns: p2.ns.name });
          try {
            const dp = check((await report(node)).r, "datapath");
            assert.equal(dp.status, "fail");
            assert.equal(dp.details?.length, 1, JSON.stringify(dp.details));
            assert.ok(
              dp.details[0].startsWith(`${p2.ip} (`) &&
                dp.details[0].endsWith(
                  "pod: route default via 169.254.1.1 dev eth0 table main missing",
                ),
              dp.details[0],
            );
          } finally {
            await sh(["ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0"], {
              netns: p2.ns.name,
            });
          }
          assert.equal(check((await report(node)).r, "datapath").status, "ok");
        },
      );

      await t.step(
        "an orphan rule is a warning; datapath --fix removes it and nothing else",
        async () => {
          await sh([
            "ip",
            "rule",
            "add",
            "priority",
            "2000",
            "from",
            "10.60.1.200/32",
            "lookup",
            "101",
          ], { netns: node.node.name });
          await sh([
            "ip",
            "rule",
            "add",
            "priority",
            "1500",
            "from",
            "10.60.1.201/32",
            "lookup",
            "101",
          ], { netns: node.node.name });
          try {
            const dry = await node.doctor(["datapath"]);
            assert.equal(dry.code, 0, dry.stdout);
            assert.match(dry.stdout, /^\[warn\] datapath: 1 orphan object/m);
            assert.match(dry.stdout, /would delete rule 2000: from 10\.60\.1\.200\/32 lookup 101/);
            assert.match(dry.stdout, /run with --fix/);
            const rulesBefore = await sh(["ip", "rule"], { netns: node.node.name });
            assert.match(rulesBefore, /10\.60\.1\.200/, "without --fix nothing changes");

            const fix = await node.doctor(["datapath", "--fix"]);
            assert.equal(fix.code, 0, fix.stdout + fix.stderr);
            assert.match(fix.stdout, /done: delete rule 2000: from 10\.60\.1\.200\/32 lookup 101/);
            const rules = await sh(["ip", "rule"], { netns: node.node.name });
            assert.doesNotMatch(rules, /10\.60\.1\.200/);
            assert.match(
              rules,
              /10\.60\.1\.201/,
              "a rule of another shape (priority 1500) is not ours: kept",
            );
            for (const p of [p1, p2]) {
              assert.match(
                rules,
                new RegExp(`1000:\\s+from all to ${p.ip.replaceAll(".", "\\.")} lookup main`),
              );
              assert.match(
                rules,
                new RegExp(`2000:\\s+from ${p.ip.replaceAll(".", "\\.")} lookup 101`),
              );
            }
          } finally {
            await run(["ip", "rule", "del", "priority", "1500", "from", "10.60.1.201/32"], {
              netns: node.node.name,
            });
            await run(["ip", "rule", "del", "priority", "2000", "from", "10.60.1.200/32"], {
              netns: node.node.name,
            });
          }
        },
      );

      await t.step("fill a subnet in the sim: subnets FAIL says to add address space", async () => {
        // Another tenant takes every address of the tiny /28 (11 usable in a VPC).
        const hog = await ec2.createNetworkInterface({
          subnetId: DOCTOR_SUBNETS.tiny,
          securityGroupIds: ["sg-0d000001"],
          secondaryIpCount: 10,
          description: "not vpcni",
        });
        const { code, r } = await report(node);
        assert.equal(code, 1);
        const sn = check(r, "subnets");
        assert.equal(sn.status, "fail", sn.found);
        assert.ok(
          sn.details?.some((d) =>
            /pool tiny: every subnet is full \(subnet-0d000003 10\.60\.2\.0\/28 0 free\)/.test(d)
          ),
          JSON.stringify(sn.details),
        );
        assert.match(sn.fix ?? "", /add a subnet .* that matches the pool's selector/);
        // A pod of that pool now cannot get an address, and the pool says why.
        const refused = await node.tryAddPod({ "vpcni.io/pool": "tiny" });
        assert.notEqual(refused.code, 0, "ADD into a full subnet must fail");
        const after = await report(node);
        const pools = check(after.r, "pools");
        assert.equal(pools.status, "fail", pools.found);
        assert.ok(
          pools.details?.some((d) => /^tiny: 0 free.*cannot grow: subnet_full/.test(d)),
          JSON.stringify(pools.details),
        );
        assert.match(pools.fix ?? "", /subnets are full: add a subnet matching its selector/);
        // That ENI carries no vpcni tags: never reported as ours.
        assert.ok(!JSON.stringify(check(r, "leaked-enis")).includes(hog.eniId));
      });

      await t.step("leak an ENI: leaked ENIs FAIL names it and how to delete it", async () => {
        const leaked = await ec2.createNetworkInterface({
          subnetId: DOCTOR_SUBNETS.internal,
          securityGroupIds: ["sg-0d000001"],
          tags: {
            "vpcni.io/cluster": DOCTOR_CLUSTER,
            "vpcni.io/instance-id": "i-0dead00000000001",
            "vpcni.io/created-at": new Date(Date.now() - 2 * 3600_000).toISOString(),
          },
        });
        const { code, r } = await report(node);
        assert.equal(code, 1);
        const lk = check(r, "leaked-enis");
        assert.equal(lk.status, "fail");
        assert.match(lk.found, new RegExp(leaked.eniId));
        assert.match(lk.fix ?? "", new RegExp(`left by i-0dead00000000001`));
        assert.match(
          lk.fix ?? "",
          new RegExp(`aws ec2 delete-network-interface --network-interface-id ${leaked.eniId}`),
        );
        await ec2.deleteNetworkInterface(leaked.eniId);
        assert.equal(check((await report(node)).r, "leaked-enis").status, "ok");
      });

      await t.step(
        "break the conflist: CNI config FAIL names the field and says to reinstall",
        async () => {
          const good = await Deno.readTextFile(node.conflist);
          const broken = JSON.parse(good);
          broken.plugins[0].mtu = "jumbo";
          await Deno.writeTextFile(node.conflist, JSON.stringify(broken));
          try {
            const { code, r } = await report(node);
            assert.equal(code, 1);
            const cc = check(r, "cni-config");
            assert.equal(cc.status, "fail");
            assert.match(
              cc.found,
              /plugins\[0\]: invalid network configuration: mtu must be a number/,
            );
            assert.match(
              cc.fix ?? "",
              /vpcni install --conflist-file .*10-vpcni\.conflist --bin-dir /,
            );
            await Deno.writeTextFile(node.conflist, "{ not json");
            assert.match(check((await report(node)).r, "cni-config").found, /is not JSON/);
            await Deno.remove(`${node.binDir}/vpcni`);
            await Deno.writeTextFile(node.conflist, good);
            assert.match(
              check((await report(node)).r, "cni-config").found,
              /not installed .* vpcni/,
            );
          } finally {
            await Deno.writeTextFile(node.conflist, good);
            await sh(vpcniArgv(
              "install",
              "--skip-conflist",
              "--bin-dir",
              node.binDir,
              "--conflist-file",
              node.conflist,
            ));
          }
          assert.equal(check((await report(node)).r, "cni-config").status, "ok");
        },
      );

      await t.step(
        "doctor bundle holds state, introspection and kernel dumps, secrets redacted",
        async () => {
          const out = `${node.root}/bundle.tar.gz`;
          const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY";
          Deno.env.set("AWS_SECRET_ACCESS_KEY", secret);
          try {
            const b = await node.doctor(["bundle", "-o", out]);
            assert.equal(b.code, 0, b.stderr);
            const list = await sh(["tar", "tzf", out]);
            for (
              const f of [
                "meta.json",
                "doctor/report.json",
                "config/conflist.json",
                "state/checkpoint.json",
                "daemon/pools.json",
                "daemon/allocations.json",
                "daemon/metrics.txt",
                "kernel/host.json",
                "kernel/sysctls.json",
                "aws/imds.json",
              ]
            ) {
              assert.match(list, new RegExp(`^${f.replaceAll(".", "\\.")}$`, "m"), `missing ${f}`);
            }
            assert.match(list, /^kernel\/pods\/vdrp.*\.json$/m);
            const all = await sh(["tar", "xzOf", out]);
            assert.ok(!all.includes(secret), "the secret key must not be in the bundle");
            assert.match(all, /"AWS_SECRET_ACCESS_KEY": "\[redacted\]"/);
            assert.ok(all.includes(p1.ip));
          } finally {
            Deno.env.set("AWS_SECRET_ACCESS_KEY", "test");
          }
        },
      );

      await t.step(
        "stop the daemon: daemon FAIL, and doctor reads the checkpoint and kernel instead",
        async () => {
          await node.stopDaemon();
          const { code, r } = await report(node);
          assert.equal(code, 1);
          const d = check(r, "daemon");
          assert.equal(d.status, "fail");
          assert.match(d.found, /not reachable/);
          assert.match(d.fix ?? "", /start the daemon/);
          assert.equal(r.source, "checkpoint+kernel");
          assert.ok(
            r.notes.some((n) => /reading the checkpoint .* IMDS and the kernel directly/.test(n)),
          );
          assert.equal(check(r, "datapath").status, "ok", check(r, "datapath").found);
          assert.match(check(r, "consistency").found, /3 allocation\(s\) agree/);
          assert.equal(check(r, "pools").status, "skip");
          const pods = await node.doctor(["pods"]);
          assert.match(pods.stderr, /daemon is not answering/);
          assert.ok(pods.stdout.includes(p1.ip) && pods.stdout.includes(p2.ip), pods.stdout);
        },
      );
    } finally {
      ec2.close();
      await node.close();
    }
  },
});
