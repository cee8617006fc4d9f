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
import { formatCidr } from "../aws/sim/ipv4.ts";
import { inNetns } from "../netlink/netns.ts";
import { createNamedNetns, deleteNamedNetns } from "../netlink/netns_named.ts";
import { NetlinkSocket } from "../netlink/socket.ts";
import { createIpvlan, createVeth, setLinkUp } from "../netlink/link.ts";
import { install } from "./install.ts";
import { DEMO_INSTANCE, demoDaemonConfig, demoScenario } from "./demo_world.ts";

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
  readonly conflistFile: string;
  readonly stateDir: string;
  readonly socketPath: string;
  readonly daemonLog: string;
  readonly datapath: string;
  #forwards: NetnsForward[];
  #daemon?: Deno.ChildProcess;
  #podNetns: string[] = [];
  #tag: string;

  private constructor(init: {
    sim: SimServer;
    fabric: Fabric;
    root: string;
    nodeNetns: string;
    forwards: NetnsForward[];
    datapath: string;
    tag: string;
  }) {
    this.sim = init.sim;
    this.fabric = init.fabric;
    this.root = init.root;
    this.nodeNetns = init.nodeNetns;
    this.nodePath = `/run/netns/${init.nodeNetns}`;
    this.binDir = `${init.root}/bin`;
    this.conflistFile = `${init.root}/net.d/10-vpcni.conflist`;
    this.stateDir = `${init.root}/state`;
    this.socketPath = `${init.root}/ipam.sock`;
    this.daemonLog = `${init.root}/daemon.log`;
    this.#forwards = init.forwards;
    this.datapath = init.datapath;
    this.#tag = init.tag;
  }

  /** Starts the simulator, the fabric and the node netns (no daemon yet). */
  static async start(o: { datapath: string; instanceType: string }): Promise<DemoNode> {
    const tag = `${Deno.pid}`;
    const root = await Deno.makeTempDir({ prefix: "vpcni-demo-" });
    const sim = await startSim({ scenario: demoScenario(o.instanceType) });
    const nodeNetns = `vpcni-demo-node-${tag}`;
    let fabric: Fabric | undefined;
    try {
      const nodePath = createNamedNetns(nodeNetns);
      using s = NetlinkSocket.openIn(nodePath);
      setLinkUp(s, "lo");
      fabric = await Fabric.create({ name: `vpcni-demo-vpc-${tag}` });
      fabric.addNode({ instanceId: DEMO_INSTANCE, netns: nodeNetns });
      fabric.follow(sim);
      await fabric.sync(sim.state);
      // The daemon inside the node netns reaches EC2 and IMDS on its own loopback, as a
      // real node reaches 169.254.169.254 and the regional endpoint.
      const forwards = [
        forwardIntoNetns(nodePath, sim.ec2Endpoint),
        forwardIntoNetns(nodePath, sim.imdsEndpointFor(DEMO_INSTANCE)),
      ];
      return new DemoNode({ sim, fabric, root, nodeNetns, forwards, datapath: o.datapath, tag });
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

  /** Installs the plugin and conflist (as `vpcni install` does), then starts the daemon. */
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
      hostVethPrefix: "vpc",
      cniVersion: "1.1.0",
    });
    const [cmd, ...args] = selfCommand();
    const log = await Deno.open(this.daemonLog, { create: true, write: true, truncate: true });
    // Forked while the thread sits in the node netns: the daemon lives there, like a
    // hostNetwork DaemonSet pod lives in the node's netns.
    this.#daemon = inNetns(this.nodePath, () =>
      new Deno.Command(cmd, {
        args: [...args, "serve", "--config", configPath],
        env: { AWS_ACCESS_KEY_ID: "demo", AWS_SECRET_ACCESS_KEY: "demo", AWS_REGION: "us-east-1" },
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
    const conflist = JSON.parse(await Deno.readTextFile(this.conflistFile));
    const plugin = conflist.plugins[0];
    const conf = {
      ...plugin,
      name: conflist.name,
      cniVersion: conflist.cniVersion,
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

  /** Creates a pod netns and ADDs it; throws with the plugin's error JSON on failure. */
  async addPod(name: string, pool?: string): Promise<DemoPod> {
    const netns = `vpcni-demo-${name}-${this.#tag}`;
    const path = createNamedNetns(netns);
    this.#podNetns.push(netns);
    const containerId = `demo${name.replace(/[^a-z0-9]/g, "")}${this.#tag}`;
    const annotations: Record<string, string> = pool ? { "vpcni.io/pool": pool } : {};
    const r = await this.cni(
      "ADD",
      { containerId, netns: path, ifName: "eth0", name },
      annotations,
    );
    if (r.code !== 0) throw new Error(`ADD ${name} failed: ${r.stdout.trim()}`);
    const result = JSON.parse(r.stdout);
    const ip = String(result.ips[0].address).split("/")[0];
    return { name, netns: path, containerId, pool: pool ?? "internal", ip, ...this.#whereIs(ip) };
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
  #whereIs(ip: string): Omit<DemoPod, "name" | "netns" | "containerId" | "pool" | "ip"> {
    for (const eni of this.sim.state.enis.values()) {
      if (!eni.privateIps.some((p) => p.address === ip)) continue;
      const subnet = this.sim.state.subnets.get(eni.subnetId)!;
      return {
        eniId: eni.id,
        deviceIndex: eni.attachment?.deviceIndex ?? -1,
        subnetId: eni.subnetId,
        subnetCidr: formatCidr(subnet.cidr),
        zone: subnet.tags.get("zone") ?? "",
      };
    }
    throw new Error(`no ENI in the VPC holds ${ip}: the daemon returned an address EC2 never gave`);
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
  async close(): Promise<void> {
    if (this.#daemon) {
      try {
        this.#daemon.kill("SIGTERM");
      } catch { /* already gone */ }
      await this.#daemon.status;
    }
    for (const n of this.#podNetns) deleteNamedNetns(n);
    for (const f of this.#forwards) f.close();
    await this.fabric.destroy().catch(() => {});
    deleteNamedNetns(this.nodeNetns);
    await this.sim.close();
    await Deno.remove(this.root, { recursive: true }).catch(() => {});
  }
}
