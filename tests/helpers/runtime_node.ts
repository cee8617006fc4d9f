/**
 * A simulated node for the container-runtime tests: the EC2 + IMDS simulator, its VPC
 * fabric, a node netns (prefix `vrt`) that holds the node's ENIs, the vpcni daemon running
 * inside that netns, and the plugin + conflist put in place by `vpcni install`. A runtime
 * started inside the same netns (see runtime_containerd.ts) then finds the plugin exactly as
 * it would on a real node.
 *
 * Built from the same pieces as `vpcni demo` (cli/demo_node.ts), with this suite's names.
 *
 * @module
 */
import { stringify } from "yaml";
import { type SimServer, startSim } from "../../aws/sim/mod.ts";
import { Fabric } from "../../aws/sim/fabric.ts";
import { forwardIntoNetns, type NetnsForward } from "../../aws/sim/netns_forward.ts";
import { formatCidr } from "../../aws/sim/ipv4.ts";
import { inNetns } from "../../netlink/netns.ts";
import { createNamedNetns, deleteNamedNetns } from "../../netlink/netns_named.ts";
import { NetlinkSocket } from "../../netlink/socket.ts";
import { setLinkUp } from "../../netlink/link.ts";
import { install } from "../../cli/install.ts";
import { selfCommand } from "../../cli/demo_node.ts";
import { DEMO_INSTANCE, demoDaemonConfig, demoScenario } from "../../cli/demo_world.ts";
import { type Checkpoint, readCheckpoint } from "../../ipam/checkpoint.ts";

/** Where the VPC (the simulator) says an address lives. */
export interface EniHome {
  eniId: string;
  instanceId: string;
  deviceIndex: number;
  /** True when `ip` is the ENI's primary address (never a pod's). */
  primary: boolean;
  subnetId: string;
  subnetCidr: string;
  zone: string;
}

/** The CNI network name the conflist declares. */
export const RUNTIME_NETWORK = "vpcni";

/** The running node (no runtime yet). */
export class RuntimeNode {
  readonly sim: SimServer;
  readonly fabric: Fabric;
  /** Temp dir holding everything this node writes. */
  readonly root: string;
  readonly nodeNetns: string;
  readonly nodePath: string;
  /** The CNI bin dir the runtime is pointed at. */
  readonly binDir: string;
  /** The CNI conf dir the runtime is pointed at. */
  readonly confDir: string;
  readonly stateDir: string;
  readonly socketPath: string;
  readonly daemonLog: string;
  #forwards: NetnsForward[];
  #daemon?: Deno.ChildProcess;

  private constructor(
    sim: SimServer,
    fabric: Fabric,
    root: string,
    nodeNetns: string,
    forwards: NetnsForward[],
  ) {
    this.sim = sim;
    this.fabric = fabric;
    this.root = root;
    this.nodeNetns = nodeNetns;
    this.nodePath = `/run/netns/${nodeNetns}`;
    this.binDir = `${root}/cni/bin`;
    this.confDir = `${root}/cni/net.d`;
    this.stateDir = `${root}/vpcni-state`;
    this.socketPath = `${root}/ipam.sock`;
    this.daemonLog = `${root}/daemon.log`;
    this.#forwards = forwards;
  }

  /** Starts the simulator, the fabric (`<prefix>-vpc`) and the node netns (`<prefix>-node`). */
  static async start(prefix: string): Promise<RuntimeNode> {
    const root = await Deno.makeTempDir({ prefix: `${prefix}-` });
    const sim = await startSim({ scenario: demoScenario("m5.large") });
    const nodeNetns = `${prefix}-node`;
    let fabric: Fabric | undefined;
    try {
      const nodePath = createNamedNetns(nodeNetns);
      {
        using s = NetlinkSocket.openIn(nodePath);
        setLinkUp(s, "lo");
      }
      fabric = await Fabric.create({ name: `${prefix}-vpc` });
      fabric.addNode({ instanceId: DEMO_INSTANCE, netns: nodeNetns });
      fabric.follow(sim);
      await fabric.sync(sim.state);
      const forwards = [
        forwardIntoNetns(nodePath, sim.ec2Endpoint),
        forwardIntoNetns(nodePath, sim.imdsEndpointFor(DEMO_INSTANCE)),
      ];
      return new RuntimeNode(sim, fabric, root, nodeNetns, forwards);
    } catch (e) {
      await fabric?.destroy().catch(() => {});
      deleteNamedNetns(nodeNetns);
      await sim.close();
      await Deno.remove(root, { recursive: true }).catch(() => {});
      throw e;
    }
  }

  /** The node's primary IP. */
  get nodeIp(): string {
    const eni = [...this.sim.state.enis.values()].find((e) =>
      e.attachment?.instanceId === DEMO_INSTANCE && e.attachment.deviceIndex === 0
    );
    return eni?.privateIps.find((p) => p.primary)?.address ?? "";
  }

  /**
   * Runs `vpcni install` into this node's CNI dirs (cniVersion 1.0.0: containerd 1.6's
   * libcni knows results up to 1.0.0) and starts `vpcni serve` inside the node netns.
   */
  async startDaemon(): Promise<void> {
    const [ec2, imds] = this.#forwards;
    const configPath = `${this.root}/vpcni.yaml`;
    await Deno.writeTextFile(
      configPath,
      stringify(demoDaemonConfig({
        ec2Endpoint: ec2.url,
        imdsEndpoint: imds.url,
        socketPath: this.socketPath,
        stateDir: this.stateDir,
        listen: "127.0.0.1:61679",
        datapath: "veth",
      })),
    );
    await Deno.mkdir(this.binDir, { recursive: true });
    await Deno.mkdir(this.confDir, { recursive: true });
    await install({
      binDir: this.binDir,
      conflistFile: `${this.confDir}/10-vpcni.conflist`,
      config: configPath,
      networkName: RUNTIME_NETWORK,
      mtu: "9001",
      serviceCidr: [],
      hostVethPrefix: "vrt",
      cniVersion: "1.0.0",
    });
    const [cmd, ...args] = selfCommand();
    const log = await Deno.open(this.daemonLog, { create: true, write: true, truncate: true });
    this.#daemon = inNetns(this.nodePath, () =>
      new Deno.Command(cmd, {
        args: [...args, "serve", "--config", configPath],
        env: { AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test", AWS_REGION: "us-east-1" },
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn());
    this.#daemon.stderr.pipeTo(log.writable).catch(() => {});
  }

  /** The conflist `vpcni install` wrote, parsed. */
  async conflist(): Promise<
    { cniVersion: string; name: string; plugins: Record<string, unknown>[] }
  > {
    return JSON.parse(await Deno.readTextFile(`${this.confDir}/10-vpcni.conflist`));
  }

  /**
   * Waits until the installed plugin's STATUS (run as a runtime would, inside the node)
   * says an ADD can be served; throws with the daemon's log on timeout or exit.
   */
  async waitReady(timeoutMs: number): Promise<void> {
    const list = await this.conflist();
    // STATUS is a CNI 1.1 verb; the conflist says 1.0.0 for containerd 1.6's sake.
    const conf = JSON.stringify({ ...list.plugins[0], name: list.name, cniVersion: "1.1.0" });
    const deadline = Date.now() + timeoutMs;
    let last = "";
    while (Date.now() < deadline) {
      const child = inNetns(this.nodePath, () =>
        new Deno.Command(`${this.binDir}/vpcni`, {
          env: { CNI_COMMAND: "STATUS", CNI_PATH: this.binDir },
          stdin: "piped",
          stdout: "piped",
          stderr: "null",
        }).spawn());
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(conf));
      await w.close();
      const out = await child.output();
      if (out.code === 0) return;
      last = new TextDecoder().decode(out.stdout).trim();
      const exited = await Promise.race([
        this.#daemon!.status.then(() => true),
        new Promise<false>((res) => setTimeout(() => res(false), 300)),
      ]);
      if (exited) break;
    }
    const log = await Deno.readTextFile(this.daemonLog).catch(() => "");
    throw new Error(
      `the vpcni daemon did not become ready (last STATUS: ${last}); its log:\n${log.slice(-3000)}`,
    );
  }

  /** The daemon's checkpoint as it is on disk now. */
  async checkpoint(): Promise<Checkpoint> {
    const c = await readCheckpoint(this.stateDir);
    if (!c) throw new Error(`no checkpoint in ${this.stateDir}`);
    return c;
  }

  /** Which ENI (and subnet) holds `ip` in the VPC, or undefined when none does. */
  whereIs(ip: string): EniHome | undefined {
    for (const eni of this.sim.state.enis.values()) {
      const held = eni.privateIps.find((p) => p.address === ip);
      if (!held) continue;
      const subnet = this.sim.state.subnets.get(eni.subnetId)!;
      return {
        eniId: eni.id,
        instanceId: eni.attachment?.instanceId ?? "",
        deviceIndex: eni.attachment?.deviceIndex ?? -1,
        primary: held.primary,
        subnetId: eni.subnetId,
        subnetCidr: formatCidr(subnet.cidr),
        zone: subnet.tags.get("zone") ?? "",
      };
    }
    return undefined;
  }

  /** The CIDRs of the subnets tagged `zone=<zone>` in the node's AZ. */
  subnetsOfZone(zone: string): string[] {
    return [...this.sim.state.subnets.values()]
      .filter((s) => s.tags.get("zone") === zone && s.az === "us-east-1a")
      .map((s) => formatCidr(s.cidr));
  }

  /** Pings `to` once from inside the netns at `fromPath`; true when it answered. */
  async ping(fromPath: string, to: string): Promise<boolean> {
    const child = inNetns(
      fromPath,
      () =>
        new Deno.Command("ping", {
          args: ["-c", "1", "-W", "2", to],
          stdout: "null",
          stderr: "null",
        })
          .spawn(),
    );
    return (await child.status).success;
  }

  /** Stops the daemon and removes the fabric, the node netns, the simulator and the temp dir. */
  async close(): Promise<void> {
    if (this.#daemon) {
      try {
        this.#daemon.kill("SIGTERM");
      } catch { /* already gone */ }
      await this.#daemon.status;
    }
    for (const f of this.#forwards) f.close();
    await this.fabric.destroy().catch(() => {});
    deleteNamedNetns(this.nodeNetns);
    await this.sim.close();
    await Deno.remove(this.root, { recursive: true }).catch(() => {});
  }
}
