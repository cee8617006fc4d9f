/**
 * Two "nodes" (netns) joined through a {@linkcode DatapathFabric}, with pods wired by the
 * real datapath code, for connectivity tests of every datapath kind. Node 1 and node 2 each
 * have a primary ENI (eth0, subnet A 10.0.0.0/24) and a secondary ENI (eth1, device 1,
 * subnet B 10.0.1.0/24, table 101). The datapath runs with the thread inside the node netns,
 * so the node netns is "the host" it sees.
 *
 * @module
 */
import { inNetns } from "../../netlink/mod.ts";
import {
  attachPod,
  checkPod,
  type DatapathConfig,
  type DatapathKind,
  detachPod,
  type EniInfo,
  type PodAttachment,
} from "../../cni/datapath/mod.ts";
import { DatapathFabric } from "./datapath_fabric.ts";
import { createNetns, deleteNetns, type TestNetns, uniqueName } from "./netns.ts";
import { run, sh } from "./sh.ts";

/** Subnets of the world. */
export const SUBNET_A = { id: "subnet-a", cidr: "10.0.0.0/24", gateway: "10.0.0.1" };
/** The secondary ENIs' subnet. */
export const SUBNET_B = { id: "subnet-b", cidr: "10.0.1.0/24", gateway: "10.0.1.1" };
/** The service CIDR routed over the host veth in ipvlan pods. */
export const SERVICE_CIDR = "10.96.0.0/12";

/** A node: its netns, address and ENIs. */
export interface WorldNode {
  ns: TestNetns;
  ip: string;
  enis: EniInfo[];
}

/** A pod wired by the datapath. */
export interface WorldPod {
  name: string;
  ns: TestNetns;
  node: WorldNode;
  ip: string;
  attachment: PodAttachment;
}

/** Everything one connectivity test built. */
export class DatapathWorld {
  readonly nodes: WorldNode[] = [];
  readonly pods = new Map<string, WorldPod>();
  private readonly servers: Deno.ChildProcess[] = [];
  private readonly extraNetns: string[] = [];
  private readonly dirs: string[] = [];

  private constructor(readonly fabric: DatapathFabric, readonly kind: DatapathKind) {}

  /** Datapath settings of `node`. */
  config(node: WorldNode): DatapathConfig {
    return {
      kind: this.kind,
      mtu: 9001,
      serviceCidrs: [SERVICE_CIDR],
      nodeIps: [node.ip],
      hostVethPrefix: "vpc",
    };
  }

  /** Builds the fabric and two nodes with both ENIs attached. */
  static async create(kind: DatapathKind, prefix = "vdp"): Promise<DatapathWorld> {
    const fabric = await DatapathFabric.create(prefix);
    const w = new DatapathWorld(fabric, kind);
    try {
      for (const n of [1, 2]) {
        const ns = await createNetns(uniqueName(`${prefix}n`));
        w.extraNetns.push(ns.name);
        const ip = `10.0.0.${9 + n}`;
        const eth0mac = `02:00:00:0${n}:00:00`;
        const eth1mac = `02:00:00:0${n}:01:00`;
        await fabric.attachEni(ns, {
          deviceIndex: 0,
          mac: eth0mac,
          subnetCidr: SUBNET_A.cidr,
          gateway: SUBNET_A.gateway,
          primaryIp: ip,
        });
        await fabric.attachEni(ns, {
          deviceIndex: 1,
          mac: eth1mac,
          subnetCidr: SUBNET_B.cidr,
          gateway: SUBNET_B.gateway,
        });
        w.nodes.push({
          ns,
          ip,
          enis: [
            eniInfo(`eni-${n}0`, eth0mac, 0, SUBNET_A),
            eniInfo(`eni-${n}1`, eth1mac, 1, SUBNET_B),
          ],
        });
      }
    } catch (e) {
      await w.destroy();
      throw e;
    }
    return w;
  }

  /** Creates a pod netns and wires it with the datapath on `node`, address from ENI `device`. */
  async addPod(name: string, node: WorldNode, device: number, ip: string): Promise<WorldPod> {
    const ns = await createNetns(uniqueName(`vdp${name}`));
    this.extraNetns.push(ns.name);
    const eni = node.enis[device];
    await this.fabric.assignIp(
      this.fabric.enis.find((e) => e.node === node.ns && e.deviceIndex === device)!,
      ip,
    );
    const attachment: PodAttachment = {
      containerId: `ctr-${ns.name}`,
      ifName: "eth0",
      netns: ns.path,
      address: { ip, prefixLen: Number(eni.subnetCidr.split("/")[1]), gateway: eni.gateway, eni },
    };
    inNetns(node.ns.path, () => attachPod(this.config(node), attachment));
    const pod = { name, ns, node, ip, attachment };
    this.pods.set(name, pod);
    return pod;
  }

  /** ADD again for a pod that was detached. */
  reattach(pod: WorldPod): void {
    inNetns(pod.node.ns.path, () => attachPod(this.config(pod.node), pod.attachment));
  }

  /** CHECK of a pod, run on its node. */
  check(pod: WorldPod): string[] {
    return inNetns(pod.node.ns.path, () => checkPod(this.config(pod.node), pod.attachment));
  }

  /** DEL of a pod, run on its node. */
  detach(pod: WorldPod): void {
    inNetns(pod.node.ns.path, () =>
      detachPod(this.config(pod.node), {
        containerId: pod.attachment.containerId,
        ifName: pod.attachment.ifName,
        netns: pod.attachment.netns,
        address: pod.attachment.address,
      }));
  }

  /** Starts an HTTP server answering `body` on port 8080 in `netns`. */
  async serve(netns: string, body: string): Promise<void> {
    const dir = await Deno.makeTempDir({ prefix: "vdp-www-" });
    this.dirs.push(dir);
    await Deno.writeTextFile(`${dir}/index.html`, body);
    const child = new Deno.Command("ip", {
      args: ["netns", "exec", netns, "busybox", "httpd", "-f", "-p", "8080", "-h", dir],
      stdout: "null",
      stderr: "null",
    }).spawn();
    this.servers.push(child);
  }

  /** Fetches http://ip:port/ from `netns`; the body, or an error text. Retries briefly. */
  async fetch(netns: string, ip: string, port = 8080): Promise<string> {
    let last = "";
    for (let i = 0; i < 10; i++) {
      const r = await run(
        ["curl", "-sS", "--max-time", "2", `http://${ip}:${port}/`],
        { netns },
      );
      if (r.code === 0) return r.stdout.trim();
      last = `GET ${ip}:${port} from ${netns} failed: ${r.stderr.trim()}`;
      await new Promise((res) => setTimeout(res, 200));
    }
    return last;
  }

  /** True when one of three pings from `netns` to `ip` is answered (`extra`: ping flags). */
  async ping(netns: string, ip: string, extra: string[] = []): Promise<boolean> {
    const r = await run(["ping", "-c", "3", "-i", "0.2", "-W", "1", ...extra, ip], { netns });
    return /[1-3] (packets )?received/.test(r.stdout);
  }

  /** Installs a kube-proxy-like DNAT `vip:80 → backend:8080` on `node` (masquerading too, when asked). */
  async addService(
    node: WorldNode,
    vip: string,
    backend: string,
    masquerade: boolean,
  ): Promise<void> {
    await this.nft(node, [
      "add table ip vdpkp",
      "add chain ip vdpkp pre { type nat hook prerouting priority -100; }",
      "add chain ip vdpkp out { type nat hook output priority -100; }",
      "add chain ip vdpkp post { type nat hook postrouting priority 100; }",
      `add rule ip vdpkp pre ip daddr ${vip} tcp dport 80 dnat to ${backend}:8080`,
      `add rule ip vdpkp out ip daddr ${vip} tcp dport 80 dnat to ${backend}:8080`,
      ...(masquerade
        ? [`add rule ip vdpkp post ct status dnat ip daddr ${backend} masquerade`]
        : []),
    ]);
  }

  /** Applies `commands` (nft commands, one a line) in the node's netns, all or none. */
  async nft(node: WorldNode, commands: string[]): Promise<void> {
    await sh(["nft", "-f", "-"], { netns: node.ns.name, stdin: `${commands.join("\n")}\n` });
  }

  /** Stops servers and deletes every netns the world made. */
  async destroy(): Promise<void> {
    for (const c of this.servers) {
      try {
        c.kill("SIGKILL");
        await c.status;
      } catch { /* already gone */ }
    }
    for (const name of this.extraNetns.reverse()) await deleteNetns(name);
    await this.fabric.destroy();
    for (const d of this.dirs) await Deno.remove(d, { recursive: true }).catch(() => {});
  }
}

function eniInfo(
  id: string,
  mac: string,
  deviceIndex: number,
  subnet: { id: string; cidr: string; gateway: string },
): EniInfo {
  return {
    id,
    mac,
    deviceIndex,
    primary: deviceIndex === 0,
    subnetId: subnet.id,
    subnetCidr: subnet.cidr,
    gateway: subnet.gateway,
    routeTable: 0,
  };
}

/**
 * Runs the connectivity cases of the datapath issue on `kind`, returning a line per case
 * that failed ([] = all passed), so kernel-lane and host tests share them.
 */
export async function connectivityFailures(kind: DatapathKind): Promise<string[]> {
  const w = await DatapathWorld.create(kind);
  const failures: string[] = [];
  const expect = (what: string, ok: boolean, detail = "") => {
    if (!ok) failures.push(`${kind}: ${what}${detail ? `: ${detail}` : ""}`);
  };
  try {
    const [n1, n2] = w.nodes;
    const p1a = await w.addPod("a", n1, 0, "10.0.0.20");
    const p1b = await w.addPod("b", n1, 1, "10.0.1.20");
    const p2b = await w.addPod("c", n2, 1, "10.0.1.30");
    for (const p of [p1a, p1b, p2b]) {
      expect(`CHECK ${p.name} right after ADD`, w.check(p).length === 0, w.check(p).join("; "));
      await w.serve(p.ns.name, `pod-${p.name}`);
    }
    await w.serve(n1.ns.name, "node-1");
    // kube-proxy-like services on node 1: one backend on the other node, one on this node.
    // ipvlan pods' replies do not come back through the node's conntrack (l2: they bypass
    // the node; l3s: the node un-NATs them on the way out but does not re-route them), so
    // with ipvlan, service traffic is masqueraded, as kube-proxy does with --masquerade-all.
    // veth pods need no masquerade.
    const masq = kind !== "veth";
    await w.addService(n1, "10.96.0.10", p2b.ip, masq);
    await w.nft(n1, [
      `add rule ip vdpkp pre ip daddr 10.96.0.11 tcp dport 80 dnat to ${p1a.ip}:8080`,
      ...(masq ? [`add rule ip vdpkp post ct status dnat ip daddr ${p1a.ip} masquerade`] : []),
    ]);

    expect(
      "pod→pod, same node (primary ENI → secondary ENI), ping",
      await w.ping(p1a.ns.name, p1b.ip),
    );
    const same = await w.fetch(p1a.ns.name, p1b.ip);
    expect("pod→pod, same node, HTTP", same === "pod-b", same);
    expect("pod→pod, other node over the secondary ENIs, ping", await w.ping(p1b.ns.name, p2b.ip));
    expect(
      "pod→pod, other node, 9001-byte frames with DF set",
      await w.ping(p1b.ns.name, p2b.ip, ["-s", "8972", "-M", "do"]),
    );
    const other = await w.fetch(p1b.ns.name, p2b.ip);
    expect("pod→pod, other node, HTTP", other === "pod-c", other);
    const back = await w.fetch(p2b.ns.name, p1b.ip);
    expect("pod→pod, other node, reverse HTTP", back === "pod-b", back);
    expect("pod→node, ping", await w.ping(p1b.ns.name, n1.ip));
    const toNode = await w.fetch(p1b.ns.name, n1.ip);
    expect("pod→node, HTTP", toNode === "node-1", toNode);
    const probe = await w.fetch(n1.ns.name, p1b.ip);
    expect("node→pod (kubelet probe), HTTP", probe === "pod-b", probe);
    const probeA = await w.fetch(n1.ns.name, p1a.ip);
    expect("node→pod on the primary ENI (kubelet probe), HTTP", probeA === "pod-a", probeA);
    const svc = await w.fetch(p1b.ns.name, "10.96.0.10", 80);
    expect("pod→ClusterIP, backend on the other node", svc === "pod-c", svc);
    const svcLocal = await w.fetch(p1b.ns.name, "10.96.0.11", 80);
    expect("pod→ClusterIP, backend on the same node", svcLocal === "pod-a", svcLocal);
    const nodeSvc = await w.fetch(n1.ns.name, "10.96.0.10", 80);
    expect("node→ClusterIP (hostNetwork pod)", nodeSvc === "pod-c", nodeSvc);
    // The fabric really enforces source ownership: nothing the pods sent was dropped, and a
    // source spoofed through the wrong ENI is.
    for (const e of w.fabric.enis) {
      const d = await w.fabric.drops(e);
      expect(`fabric dropped nothing from ${e.node.name}/${e.name}`, d === 0, `${d} drops`);
    }
    return failures;
  } finally {
    await w.destroy();
  }
}
