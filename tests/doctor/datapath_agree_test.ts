/**
 * CNI CHECK and `vpcni doctor datapath` judge a pod with one comparator
 * (cni/datapath/compare.ts): on a real node (simulator, `vpcni serve`, the installed plugin,
 * a pod added by cnitool), each single fault made with `ip` is reported by both in the same
 * words, CHECK as the spec's error JSON (code 101) and doctor as a finding; the intact pod
 * passes both.
 *
 * @module
 */
import assert from "node:assert/strict";
import { type DoctorNode, type DoctorPod, startDoctorNode } from "../helpers/doctor_node.ts";
import { ipJson, run, sh } from "../helpers/sh.ts";

/** The installed plugin's CHECK of `pod`, run as a runtime runs it; its exit and error. */
async function cniCheck(node: DoctorNode, pod: DoctorPod, containerId: string) {
  const list = JSON.parse(await Deno.readTextFile(node.conflist)) as {
    cniVersion: string;
    name: string;
    plugins: Record<string, unknown>[];
  };
  const plugin = list.plugins.find((p) => p.type === "vpcni");
  assert.ok(plugin, `no vpcni plugin in ${node.conflist}`);
  const r = await run([`${node.binDir}/vpcni`], {
    netns: node.node.name,
    env: {
      CNI_COMMAND: "CHECK",
      CNI_CONTAINERID: containerId,
      CNI_NETNS: pod.ns.path,
      CNI_IFNAME: "eth0",
      CNI_PATH: node.binDir,
    },
    stdin: JSON.stringify({
      cniVersion: list.cniVersion,
      name: list.name,
      ...plugin,
      prevResult: pod.result,
    }),
  });
  const error = r.code === 0 ? undefined : JSON.parse(r.stdout) as {
    code: number;
    msg: string;
    details?: string;
  };
  return { code: r.code, error, stderr: r.stderr };
}

/** `doctor datapath --json`: its exit and the findings about `ip`. */
async function doctorFindings(node: DoctorNode, ip: string) {
  const r = await node.doctor(["datapath", "--json"]);
  const out = JSON.parse(r.stdout) as {
    check: { status: string; details?: string[] };
    findings: { missing: { ip: string; what: string }[] };
  };
  return {
    code: r.code,
    status: out.check.status,
    details: out.check.details ?? [],
    found: out.findings.missing.filter((m) => m.ip === ip).map((m) => m.what),
  };
}

Deno.test({
  name: "CHECK and doctor datapath report each single fault of a pod in the same words",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn(t) {
    const node = await startDoctorNode();
    try {
      const pod = await node.addPod();
      const allocations = await fetch(`http://127.0.0.1:${node.port}/v1/allocations`)
        .then((r) => r.json()) as { ip: string; containerId: string }[];
      const containerId = allocations.find((a) => a.ip === pod.ip)?.containerId;
      assert.ok(containerId, `the daemon holds no allocation for ${pod.ip}`);
      const ns = node.node.name;
      const [hostRoute] = await ipJson<{ dev: string }[]>(["route", "show", `${pod.ip}/32`], ns);
      const hostVeth = hostRoute.dev;
      const [eniRoute] = await ipJson<{ dev: string }[]>(["route", "show", "default"], ns);
      const otherLink = eniRoute.dev;
      const [veth] = await ipJson<{ mtu: number }[]>(["link", "show", hostVeth], ns);

      const bothPass = async (when: string) => {
        const c = await cniCheck(node, pod, containerId);
        assert.equal(c.code, 0, `${when}: CHECK failed: ${JSON.stringify(c.error)} ${c.stderr}`);
        const d = await doctorFindings(node, pod.ip);
        assert.deepEqual(d.found, [], `${when}: doctor found ${d.found.join("; ")}`);
        assert.equal(d.status, "ok", `${when}: doctor datapath ${d.status}`);
        assert.equal(d.code, 0);
      };
      await t.step("the intact pod passes CHECK and doctor", () => bothPass("intact"));

      const faults: {
        name: string;
        netns: string;
        make: string[];
        undo: string[];
        want: string;
      }[] = [
        {
          name: "the host route to the pod leaves by the wrong link",
          netns: ns,
          make: ["ip", "route", "replace", `${pod.ip}/32`, "dev", otherLink, "scope", "link"],
          undo: ["ip", "route", "replace", `${pod.ip}/32`, "dev", hostVeth, "scope", "link"],
          want: `host: route ${pod.ip}/32 dev ${hostVeth} scope link table main is wrong: ` +
            `found ${pod.ip}/32 dev ${otherLink}`,
        },
        {
          name: "the rule to the pod is deleted",
          netns: ns,
          make: ["ip", "rule", "del", "priority", "1000", "to", `${pod.ip}/32`, "lookup", "main"],
          undo: ["ip", "rule", "add", "priority", "1000", "to", `${pod.ip}/32`, "lookup", "main"],
          want: `host: rule 1000: to ${pod.ip}/32 lookup main missing`,
        },
        {
          name: "the pod's default route is deleted",
          netns: pod.ns.name,
          make: ["ip", "route", "del", "default"],
          undo: ["ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0"],
          want: "pod: route default via 169.254.1.1 dev eth0 table main missing",
        },
        {
          name: "the host veth's MTU is changed",
          netns: ns,
          make: ["ip", "link", "set", hostVeth, "mtu", String(veth.mtu - 100)],
          undo: ["ip", "link", "set", hostVeth, "mtu", String(veth.mtu)],
          want: `host: link ${hostVeth} has MTU ${veth.mtu - 100}, expected ${veth.mtu}`,
        },
      ];
      for (const f of faults) {
        await t.step(`${f.name}: both name it`, async () => {
          await sh(f.make, { netns: f.netns });
          try {
            const c = await cniCheck(node, pod, containerId);
            assert.notEqual(c.code, 0, "CHECK must fail");
            assert.equal(c.error?.code, 101, JSON.stringify(c.error));
            assert.equal(
              c.error?.msg,
              `CHECK found 1 problem(s) with eth0 in ${pod.ns.path}: ${f.want}`,
            );
            assert.equal(c.error?.details, f.want);
            const d = await doctorFindings(node, pod.ip);
            assert.deepEqual(d.found, [f.want], "doctor's finding is CHECK's, word for word");
            assert.equal(d.status, "fail");
            assert.equal(d.code, 1);
            assert.ok(
              d.details.some((x) => x.startsWith(`${pod.ip} (`) && x.endsWith(f.want)),
              d.details.join("\n"),
            );
          } finally {
            await sh(f.undo, { netns: f.netns });
          }
          await bothPass(`after undoing "${f.name}"`);
        });
      }
    } catch (e) {
      console.error(node.daemonLog().slice(-3000));
      throw e;
    } finally {
      await node.close();
    }
  },
});
