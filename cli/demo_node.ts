/**
 * The simulated node behind `vpcni demo`: the simulator and its fabric, a node netns that
 * holds the node's ENIs, the daemon running inside that netns, and pods added and deleted
 * through the CNI plugin exactly as a container runtime would: exec the installed binary
 * with the CNI environment and the network configuration on stdin.
 *
 * @module
 */
import { stringify } from "yaml";
import { startSim } from "../aws/sim/mod.ts";
import type { SimServer } from "../aws/sim/mod.ts";
import { Fabric } from "../aws/sim/fabric.ts";
import { forwardIntoNetns, type NetnsForward } from "../aws/sim/netns_forward.ts";
import { formatIpv4Cidr } from "../base/ipv4.ts";
import { inNetns } from "../netlink/netns.ts";
import { createNamedNetns, deleteNamedNetns } from "../netlink/netns_named.ts";
import { NetlinkSocket } from "../netlink/socket.ts";
import { createIpvlan, createVeth, setLinkUp } from "../netlink/link.ts";
import { install } from "./install.ts";
import {
  DEMO_INSTANCE,
  demoDaemonConfig,
  demoDaemonEnv,
  type DemoKubelet,
  demoScenario,
} from "./demo_world.ts";

/** Where the VPC (the simulator) says an address lives. */
export interface EniHome {
  eniId: string;
  instanceId: string;
  deviceIndex: number;
  /** True when the address is the ENI's primary address (never a pod's). */
  primary: boolean;
  subnetId: string;
  subnetCidr: string;
  zone: string;
}

/** How to build the node. */
export interface DemoNodeOptions {
  datapath: string;
  instanceType: string;
  /** Prefix of every netns name (`<prefix>-node`, `<prefix>-vpc`, `<prefix>-<pod>`). */
  prefix?: string;
  /** cniVersion of the installed conflist (containerd 1.6 speaks up to 1.0.0). */
  cniVersion?: string;
  /** Host-side link name prefix of the pods (1-4 characters). */
  hostVethPrefix?: string;
  /**
   * A kubelet a test runs for this node: the daemon's device plugin is then `auto` at its
   * paths. Without it (the demo) the device plugin is off.
   */
  kubelet?: DemoKubelet;
}

/** One pod of the demo, after ADD. */
export interface DemoPod {
  name: string;
  netns: string;
  containerId: string;
  pool: string;
  ip: string;
  eniId: string;
  deviceIndex: number;
  subnetId: string;
  subnetCidr: string;
  zone: string;
}

/** How to run this very program again (compiled binary or `deno run` of main.ts). */
export function selfCommand(): string[] {
  const exe = Deno.execPath();
  if (exe.split("/").pop() === "deno") {
    return [
      exe,
      "run",
      "--allow-all",
      "--no-check",
      new URL("../main.ts", import.meta.url).pathname,
    ];
  }
  return [exe];
}

/** True when this kernel can make ipvlan links (tried in a scratch netns). */
export function kernelHasIpvlan(tag: string): boolean {
  const name = `vpcni-probe-${tag}`;
  const path = createNamedNetns(name);
  try {
    using s = NetlinkSocket.openIn(path);
    createVeth(s, { name: "probe0", peerName: "probe1" });
    createIpvlan(s, { name: "probe2", parent: "probe0", mode: "l2" });
    return true;
  } catch {
    return false;
  } finally {
    deleteNamedNetns(name);
  }
}

/** The running node. */
export class DemoNode {
  readonly sim: SimServer;
  readonly fabric: Fabric;
  readonly root: string;
  readonly nodeNetns: string;
  readonly nodePath: string;
  readonly binDir: string;
  readonly confDir: string;
  readonly conflistFile: string;
  readonly stateDir: string;
  readonly socketPath: string;
  readonly daemonLog: string;
  readonly datapath: string;
  #forwards: NetnsForward[];
  #daemon?: Deno.ChildProcess;
  #podNetns: string[] = [];
  #prefix: string;
  #cniVersion: string;
  #hostVethPrefix: string;
  #kubelet?: DemoKubelet;

  private constructor(init: {
    sim: SimServer;
    fabric: Fabric;
    root: string;
    nodeNetns: string;
    forwards: NetnsForward[];
    options: DemoNodeOptions;
    prefix: string;
  }) {
    this.sim = init.sim;
    this.fabric = init.fabric;
    this.root = init.root;
    this.nodeNetns = init.nodeNetns;
    this.nodePath = `/run/netns/${init.nodeNetns}`;
    this.binDir = `${init.root}/bin`;
    this.confDir = `${init.root}/net.d`;
    this.conflistFile = `${this.confDir}/10-vpcni.conflist`;
    this.stateDir = `${init.root}/state`;
    this.socketPath = `${init.root}/ipam.sock`;
    this.daemonLog = `${init.root}/daemon.log`;
    this.#forwards = init.forwards;
    this.datapath = init.options.datapath;
    this.#prefix = init.prefix;
    this.#cniVersion = init.options.cniVersion ?? "1.1.0";
    this.#hostVethPrefix = init.options.hostVethPrefix ?? "vpc";
    this.#kubelet = init.options.kubelet;
  }

  /** Starts the simulator, the fabric and the node netns (no daemon yet). */
  static async start(o: DemoNodeOptions): Promise<DemoNode> {
    const prefix = o.prefix ?? `vpcni-demo-${Deno.pid}`;
    const root = await Deno.makeTempDir({ prefix: `${prefix}-` });
    const sim = await startSim({ scenario: demoScenario(o.instanceType) });
    const nodeNetns = `${prefix}-node`;
    let fabric: Fabric | undefined;
    try {
      const nodePath = createNamedNetns(nodeNetns);
      using s = NetlinkSocket.openIn(nodePath);
      setLinkUp(s, "lo");
      fabric = await Fabric.create({ name: `${prefix}-vpc` });
      fabric.addNode({ instanceId: DEMO_INSTANCE, netns: nodeNetns });
      fabric.follow(sim);
      await fabric.sync(sim.state);
      // The daemon inside the node netns reaches EC2 and IMDS on its own loopback, as a
      // real node reaches 169.254.169.254 and the regional endpoint.
      const forwards = [
        forwardIntoNetns(nodePath, sim.ec2Endpoint),
        forwardIntoNetns(nodePath, sim.imdsEndpointFor(DEMO_INSTANCE)),
      ];
      return new DemoNode({ sim, fabric, root, nodeNetns, forwards, options: o, prefix });
    } catch (e) {
      await fabric?.destroy().catch(() => {});
      deleteNamedNetns(nodeNetns);
      await sim.close();
      await Deno.remove(root, { recursive: true }).catch(() => {});
      throw e;
    }
  }

  /** The node's primary IP (the primary ENI's primary address). */
  get nodeIp(): string {
    const eni = [...this.sim.state.enis.values()].find((e) =>
      e.attachment?.instanceId === DEMO_INSTANCE && e.attachment.deviceIndex === 0
    );
    return eni?.privateIps.find((p) => p.primary)?.address ?? "";
  }

  /**
   * Installs the plugin and conflist (as `vpcni install` does), then starts the daemon; with
   * `ownMountNamespace`, in a private mount namespace of its own, as in its DaemonSet
   * container: mounts made on the node later (a runtime's pod netns) do not reach it.
   */
  async startDaemon(opts: { ownMountNamespace?: boolean } = {}): Promise<void> {
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
        datapath: this.datapath,
      })),
    );
    await install({
      binDir: this.binDir,
      conflistFile: this.conflistFile,
      config: configPath,
      networkName: "vpcni",
      mtu: "9001",
      serviceCidr: [],
      hostVethPrefix: this.#hostVethPrefix,
      cniVersion: this.#cniVersion,
    });
    const [cmd, ...args] = [
      ...(opts.ownMountNamespace ? ["unshare", "--mount", "--propagation", "private", "--"] : []),
      ...selfCommand(),
    ];
    const log = await Deno.open(this.daemonLog, { create: true, write: true, truncate: true });
    // Forked while the thread sits in the node netns: the daemon lives there, like a
    // hostNetwork DaemonSet pod lives in the node's netns.
    this.#daemon = inNetns(this.nodePath, () =>
      new Deno.Command(cmd, {
        args: [...args, "serve", "--config", configPath],
        env: demoDaemonEnv(this.#kubelet),
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn());
    this.#daemon.stderr.pipeTo(log.writable).catch(() => {});
  }

  /** Waits until the plugin's STATUS says an ADD can be served; false on timeout. */
  async waitReady(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const r = await this.cni("STATUS", { containerId: "", netns: "", ifName: "" });
      if (r.code === 0) return true;
      const exited = await Promise.race([
        this.#daemon!.status.then(() => true),
        new Promise<false>((res) => setTimeout(() => res(false), 300)),
      ]);
      if (exited) return false;
    }
    return false;
  }

  /** Runs the installed plugin once, as a runtime does; returns exit code and stdout. */
  async cni(
    command: string,
    pod: { containerId: string; netns: string; ifName: string; name?: string },
    annotations: Record<string, string> = {},
  ): Promise<{ code: number; stdout: string }> {
    const conflist = await this.conflist();
    const plugin = conflist.plugins[0];
    const conf = {
      ...plugin,
      name: conflist.name,
      // STATUS is a CNI 1.1 verb, whatever version the conflist keeps for its runtime.
      cniVersion: command === "STATUS" ? "1.1.0" : conflist.cniVersion,
      runtimeConfig: { "io.kubernetes.cri.pod-annotations": annotations },
    };
    const env: Record<string, string> = {
      CNI_COMMAND: command,
      CNI_PATH: this.binDir,
    };
    if (command !== "STATUS") {
      Object.assign(env, {
        CNI_CONTAINERID: pod.containerId,
        CNI_NETNS: pod.netns,
        CNI_IFNAME: pod.ifName,
        CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=${pod.name ?? ""}`,
      });
    }
    const child = inNetns(this.nodePath, () =>
      new Deno.Command(`${this.binDir}/vpcni`, {
        env,
        stdin: "piped",
        stdout: "piped",
        stderr: "null",
      }).spawn());
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(JSON.stringify(conf)));
    await w.close();
    const out = await child.output();
    return { code: out.code, stdout: new TextDecoder().decode(out.stdout) };
  }

  /** The conflist `vpcni install` wrote, parsed. */
  async conflist(): Promise<
    { cniVersion: string; name: string; plugins: Record<string, unknown>[] }
  > {
    return JSON.parse(await Deno.readTextFile(this.conflistFile));
  }

  /** Creates a pod netns and ADDs it; throws with the plugin's error JSON on failure. */
  async addPod(name: string, pool?: string): Promise<DemoPod> {
    const netns = `${this.#prefix}-${name}`;
    const path = createNamedNetns(netns);
    this.#podNetns.push(netns);
    const containerId = `${this.#prefix}-${name}`.replace(/[^A-Za-z0-9]/g, "");
    const annotations: Record<string, string> = pool ? { "vpcni.io/pool": pool } : {};
    const r = await this.cni(
      "ADD",
      { containerId, netns: path, ifName: "eth0", name },
      annotations,
    );
    if (r.code !== 0) throw new Error(`ADD ${name} failed: ${r.stdout.trim()}`);
    const result = JSON.parse(r.stdout);
    const ip = String(result.ips[0].address).split("/")[0];
    const home = this.whereIs(ip);
    if (!home) {
      throw new Error(
        `no ENI in the VPC holds ${ip}: the daemon returned an address EC2 never gave`,
      );
    }
    const { eniId, deviceIndex, subnetId, subnetCidr, zone } = home;
    const where = { eniId, deviceIndex, subnetId, subnetCidr, zone };
    return { name, netns: path, containerId, pool: pool ?? "internal", ip, ...where };
  }

  /** DELs a pod through the plugin and removes its netns. */
  async deletePod(p: DemoPod): Promise<boolean> {
    const r = await this.cni("DEL", { containerId: p.containerId, netns: p.netns, ifName: "eth0" });
    const name = p.netns.split("/").pop()!;
    deleteNamedNetns(name);
    this.#podNetns = this.#podNetns.filter((n) => n !== name);
    return r.code === 0;
  }

  /** Which ENI and subnet hold `ip`, as the VPC (the simulator) sees it. */
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
        subnetCidr: formatIpv4Cidr(subnet.cidr),
        zone: subnet.tags.get("zone") ?? "",
      };
    }
    return undefined;
  }

  /** The CIDRs of the subnets tagged `zone=<zone>` in the node's AZ. */
  subnetsOfZone(zone: string): string[] {
    const az = this.sim.state.instance(DEMO_INSTANCE).az;
    return [...this.sim.state.subnets.values()]
      .filter((s) => s.tags.get("zone") === zone && s.az === az)
      .map((s) => formatIpv4Cidr(s.cidr));
  }

  /** Pings `to` once from inside `fromNetns` (a path); true when it answered. */
  async ping(fromNetns: string, to: string): Promise<boolean> {
    const child = inNetns(fromNetns, () =>
      new Deno.Command("ping", {
        args: ["-c", "1", "-W", "2", to],
        stdout: "null",
        stderr: "null",
      }).spawn());
    return (await child.status).success;
  }

  /** Stops everything and removes every namespace and file the demo made. */
  /** Stops the daemon (SIGTERM) and waits for it to exit; {@linkcode startDaemon} starts it again. */
  async stopDaemon(): Promise<void> {
    const daemon = this.#daemon;
    this.#daemon = undefined;
    if (!daemon) return;
    try {
      daemon.kill("SIGTERM");
    } catch { /* already gone */ }
    await daemon.status;
  }

  async close(): Promise<void> {
    await this.stopDaemon();
    for (const n of this.#podNetns) deleteNamedNetns(n);
    for (const f of this.#forwards) f.close();
    await this.fabric.destroy().catch(() => {});
    deleteNamedNetns(this.nodeNetns);
    await this.sim.close();
    await Deno.remove(this.root, { recursive: true }).catch(() => {});
  }
}
