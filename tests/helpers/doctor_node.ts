/**
 * A whole node for doctor's tests, built from the real parts: the simulator (EC2 + IMDS on
 * loopback) and its fabric, a node netns whose ENIs the fabric wires, `vpcni serve` as a
 * child process, the plugin installed by `vpcni install`, and pods added by the reference
 * `cnitool`. Doctor then runs as the CLI with `--host-netns` pointing at the node netns.
 *
 * Netns names start with `vdr`.
 *
 * @module
 */
import { stringify } from "yaml";
import { type ScenarioInput, type SimServer, startSim } from "../../aws/sim/mod.ts";
import { Fabric } from "../../aws/sim/fabric.ts";
import { createNetns, deleteNetns, isRoot, type TestNetns, uniqueName } from "./netns.ts";
import { peerBin } from "./peers.ts";
import { run, type RunResult, sh } from "./sh.ts";
import { vpcniArgv } from "./vpcni_cli.ts";
import { freePort } from "./aws_peers.ts";
import { COMPILE_PERMISSIONS } from "../../tools/compile.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
/**
 * The daemon and doctor run with exactly the permissions `deno task compile` bakes into the
 * executable (not -A), so a missing permission shows up here rather than on a node.
 */
const PERMS = [...COMPILE_PERMISSIONS];

/** The node's instance. */
export const DOCTOR_INSTANCE = "i-0d0c000000000001";
/** Subnets of the doctor scenario. */
export const DOCTOR_SUBNETS = {
  node: "subnet-0d000001",
  internal: "subnet-0d000002",
  tiny: "subnet-0d000003",
};
/** The cluster name the daemon tags ENIs with. */
export const DOCTOR_CLUSTER = "doctor-test";

/** One VPC, one node: the node subnet, an "internal" pods subnet and a tiny /28. */
export function doctorScenario(): ScenarioInput {
  return {
    region: "us-east-1",
    vpc: { id: "vpc-0d000001", cidrs: ["10.60.0.0/16"] },
    subnets: [
      { id: DOCTOR_SUBNETS.node, cidr: "10.60.0.0/24", az: "us-east-1a", tags: { zone: "node" } },
      {
        id: DOCTOR_SUBNETS.internal,
        cidr: "10.60.1.0/24",
        az: "us-east-1a",
        tags: { zone: "internal" },
      },
      { id: DOCTOR_SUBNETS.tiny, cidr: "10.60.2.0/28", az: "us-east-1a", tags: { zone: "tiny" } },
    ],
    securityGroups: [{ id: "sg-0d000001", name: "node", tags: { role: "node" } }],
    instances: [{
      id: DOCTOR_INSTANCE,
      type: "m5.xlarge",
      subnet: DOCTOR_SUBNETS.node,
      securityGroups: ["sg-0d000001"],
      az: "us-east-1a",
    }],
  };
}

/** A pod added through cnitool. */
export interface DoctorPod {
  ns: TestNetns;
  ip: string;
  /** The chain's ADD result, as cnitool printed it (a CHECK's prevResult). */
  result: unknown;
}

/** The running node. */
export interface DoctorNode {
  sim: SimServer;
  fabric: Fabric;
  node: TestNetns;
  root: string;
  port: number;
  conflist: string;
  binDir: string;
  stateDir: string;
  daemon?: Deno.ChildProcess;
  pods: DoctorPod[];
  /** Adds a pod through cnitool inside the node netns. */
  addPod(): Promise<DoctorPod>;
  /** Tries an ADD with pod annotations (runtime capability); returns cnitool's outcome. */
  tryAddPod(annotations: Record<string, string>): Promise<RunResult>;
  /** Runs `vpcni doctor [sub] … --json`-able with every source flag pointing at this node. */
  doctor(args: string[]): Promise<RunResult>;
  /** Stops the daemon (SIGTERM) and waits for it. */
  stopDaemon(): Promise<void>;
  /** Daemon log so far (for failure messages). */
  daemonLog(): string;
  close(): Promise<void>;
}

const AWS_ENV = {
  AWS_ACCESS_KEY_ID: "test",
  AWS_SECRET_ACCESS_KEY: "test",
  AWS_REGION: "us-east-1",
};

/** Builds the node; throws with a clear message when not root or cnitool is missing. */
export async function startDoctorNode(): Promise<DoctorNode> {
  if (!isRoot()) throw new Error("doctor node tests need root (netns, fabric)");
  const cnitool = peerBin("cnitool");
  const sim = await startSim({ scenario: doctorScenario() });
  const root = await Deno.makeTempDir({ prefix: "vdr-node-" });
  const made: string[] = [];
  let fabric: Fabric | undefined;
  let daemon: Deno.ChildProcess | undefined;
  const logChunks: Uint8Array[] = [];
  try {
    const node = await createNetns(uniqueName("vdrn"));
    made.push(node.name);
    fabric = await Fabric.create({ name: uniqueName("vdrf") });
    fabric.addNode({ instanceId: DOCTOR_INSTANCE, netns: node.name });
    fabric.follow(sim);
    await fabric.sync(sim.state);

    const port = freePort();
    const stateDir = `${root}/state`;
    const socket = `${root}/ipam.sock`;
    const configPath = `${root}/vpcni.yaml`;
    await Deno.writeTextFile(
      configPath,
      stringify({
        clusterName: DOCTOR_CLUSTER,
        datapath: "veth",
        socketPath: socket,
        stateDir,
        listen: `127.0.0.1:${port}`,
        region: "us-east-1",
        ec2Endpoint: sim.ec2Endpoint,
        imdsEndpoint: sim.imdsEndpointFor(DOCTOR_INSTANCE),
        reconcileIntervalSeconds: 0.3,
        addTimeoutSeconds: 2,
        leakedEniGraceSeconds: 3600,
        // The daemon runs outside the node netns here (the simulator is on this loopback):
        // it wires pods from the node netns, and cannot program egress SNAT there
        // (tests/egress covers that): the pools leave it off.
        nodeNetns: node.path,
        pools: [
          {
            name: "default",
            subnets: { tags: "zone=internal" },
            warmIps: 2,
            warmEnis: 0,
            firstInterfaceIndex: 1,
            snat: "none",
          },
          {
            name: "tiny",
            subnets: { tags: "zone=tiny" },
            warmIps: 0,
            warmEnis: 0,
            firstInterfaceIndex: 1,
            snat: "none",
          },
        ],
      }),
    );
    const binDir = `${root}/bin`;
    const conflist = `${root}/net.d/10-vpcni.conflist`;
    await sh(
      vpcniArgv(
        "install",
        "--bin-dir",
        binDir,
        "--conflist-file",
        conflist,
        "--config",
        configPath,
        "--mtu",
        "1500",
      ),
    );

    daemon = new Deno.Command(Deno.execPath(), {
      args: ["run", ...PERMS, "--no-check", MAIN, "serve", "--config", configPath],
      env: AWS_ENV,
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    daemon.stderr.pipeTo(new WritableStream({ write: (c) => void logChunks.push(c) })).catch(
      () => {},
    );
    const logText = () =>
      new TextDecoder().decode(new Uint8Array(logChunks.flatMap((c) => [...c])));
    const deadline = Date.now() + 60_000;
    while (true) {
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        async (r) => (await r.body?.cancel(), r.ok),
        () => false,
      );
      if (ok) break;
      const exited = await Promise.race([
        daemon.status.then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), 10)),
      ]);
      if (exited) throw new Error(`vpcni serve exited:\n${logText().slice(-3000)}`);
      if (Date.now() > deadline) {
        throw new Error(`vpcni serve not ready in 60 s:\n${logText().slice(-3000)}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }

    const self: DoctorNode = {
      sim,
      fabric,
      node,
      root,
      port,
      conflist,
      binDir,
      stateDir,
      daemon,
      pods: [],
      async addPod() {
        // Wait for a warm address, so the ADD never waits on EC2 (that is the daemon's test).
        const until = Date.now() + 30_000;
        while (Date.now() < until) {
          const pools = await fetch(`http://127.0.0.1:${port}/v1/pools`).then((r) => r.json()) as {
            name: string;
            free: number;
          }[];
          if ((pools.find((p) => p.name === "default")?.free ?? 0) > 0) break;
          await new Promise((r) => setTimeout(r, 200));
        }
        const ns = await createNetns(uniqueName("vdrp"));
        made.push(ns.name);
        const r = await run([cnitool, "add", "vpcni", ns.path], {
          netns: node.name,
          env: { NETCONFPATH: `${root}/net.d`, CNI_PATH: binDir },
        });
        if (r.code !== 0) {
          throw new Error(
            `cnitool add failed (${r.code}): ${r.stdout}${r.stderr}\n${logText().slice(-2000)}`,
          );
        }
        const result = JSON.parse(r.stdout) as { ips: { address: string }[] };
        const pod = { ns, ip: result.ips[0].address.split("/")[0], result };
        self.pods.push(pod);
        return pod;
      },
      async tryAddPod(annotations) {
        const ns = await createNetns(uniqueName("vdrp"));
        made.push(ns.name);
        return await run([cnitool, "add", "vpcni", ns.path], {
          netns: node.name,
          env: {
            NETCONFPATH: `${root}/net.d`,
            CNI_PATH: binDir,
            CAP_ARGS: JSON.stringify({ "io.kubernetes.cri.pod-annotations": annotations }),
          },
        });
      },
      async doctor(args) {
        // Every source flag points at this node unless `args` gives it; subcommands take
        // them after their name.
        const defaults: [string, string][] = [
          ["--host-netns", node.path],
          ["--daemon", `127.0.0.1:${port}`],
          ["--state-dir", stateDir],
          ["--config", configPath],
          ["--imds-endpoint", sim.imdsEndpointFor(DOCTOR_INSTANCE)],
          ["--ec2-endpoint", sim.ec2Endpoint],
          ["--region", "us-east-1"],
          ["--conflist-file", conflist],
          ["--bin-dir", binDir],
        ];
        const flags = defaults.filter(([f]) => !args.includes(f)).flat();
        return await run(
          ["deno", "run", ...PERMS, "--no-check", "--quiet", MAIN, "doctor", ...args, ...flags],
          { env: { ...Deno.env.toObject(), ...AWS_ENV, NO_COLOR: "1" } },
        );
      },
      async stopDaemon() {
        if (!self.daemon) return;
        try {
          self.daemon.kill("SIGTERM");
        } catch { /* already gone */ }
        await self.daemon.status;
        self.daemon = undefined;
      },
      daemonLog: logText,
      async close() {
        await self.stopDaemon();
        await fabric!.destroy().catch(() => {});
        for (const n of made) await deleteNetns(n);
        await sim.close();
        await Deno.remove(root, { recursive: true }).catch(() => {});
      },
    };
    return self;
  } catch (e) {
    if (daemon) {
      try {
        daemon.kill("SIGKILL");
      } catch { /* gone */ }
      await daemon.status;
    }
    await fabric?.destroy().catch(() => {});
    for (const n of made) await deleteNetns(n);
    await sim.close();
    await Deno.remove(root, { recursive: true }).catch(() => {});
    throw e;
  }
}
