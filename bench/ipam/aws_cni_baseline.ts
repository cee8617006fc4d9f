/**
 * The peer for bench/ipam: a reimplementation of the AWS VPC CNI's default warm-pool policy
 * (ipamd with WARM_ENI_TARGET=1, no WARM_IP_TARGET/MINIMUM_IP_TARGET), driven through the
 * same EC2/IMDS clients against the same simulator. What it does, as documented for ipamd:
 * - at start, one DescribeNetworkInterfaces of the node's ENIs (ipamd's node init), whose
 *   attached ENIs and addresses it takes over (a restarted ipamd rebuilds its pool from them,
 *   and its pods' addresses from its checkpoint: `start({ used })`);
 * - a pool monitor every 5 s: while fewer than one ENI's worth of addresses is available
 *   (cooling addresses are not available), fill the newest ENI that has room with all the
 *   addresses it can take in one AssignPrivateIpAddresses call, else create a new ENI with
 *   all its addresses in the CreateNetworkInterface call, attach it, wait for IMDS to show
 *   it (ipamd polls the metadata, not EC2) and set delete-on-termination;
 * - every 30 s a decrease pass frees an ENI with no pods while more than one ENI's worth
 *   beyond the target is available;
 * - released addresses cool down for 30 s.
 * The bench makes an ADD wait until an address is available (as if the runtime retried with
 * no delay), and an ADD that finds the pool empty kicks the monitor at once: both favour the
 * peer over the real ipamd.
 *
 * @module
 */
import type { CloudApi } from "../../ipam/cloud.ts";

interface Eni {
  id: string;
  deviceIndex: number;
  attachmentId?: string;
  ips: string[];
}

/** The baseline allocator. */
export class AwsCniWarmEniBaseline {
  #enis: Eni[] = [];
  #used = new Set<string>();
  #cooling = new Map<string, number>();
  #waiters: (() => void)[] = [];
  #busy = false;
  #timers: ReturnType<typeof setInterval>[] = [];
  #instanceId = "";
  #maxEnis = 0;
  #perEni = 0;
  #subnetId = "";
  #sgs: string[] = [];

  /** `scale` multiplies every period (the bench runs AWS time scaled down). */
  constructor(readonly cloud: CloudApi, readonly scale: number) {}

  /** Learns the node and starts the monitor loops; `used`: pods' addresses of a restart. */
  async start(o: { used?: Iterable<string> } = {}): Promise<void> {
    const node = await this.cloud.nodeMetadata();
    const limits = await this.cloud.instanceLimits(node.instanceType);
    // ipamd's node init describes the node's ENIs once (DescribeAllENIs: their tags say which
    // ENIs it must leave alone, and a restart finds its earlier ENIs there).
    const attached = await this.cloud.describeAttachedEnis(node.instanceId);
    for (const ip of o.used ?? []) this.#used.add(ip);
    this.#instanceId = node.instanceId;
    this.#maxEnis = limits.maxEnis;
    this.#perEni = limits.ipv4PerEni - 1;
    const primary = node.enis.find((e) => e.deviceIndex === 0)!;
    this.#subnetId = primary.subnetId;
    this.#sgs = primary.securityGroupIds;
    this.#enis.push({ id: primary.eniId, deviceIndex: 0, ips: primary.localIpv4s.slice(1) });
    for (const e of attached) {
      if (!e.attachment || e.attachment.deviceIndex === 0) continue;
      this.#enis.push({
        id: e.id,
        deviceIndex: e.attachment.deviceIndex,
        attachmentId: e.attachment.id,
        ips: e.privateIps.slice(1),
      });
    }
    this.#timers.push(setInterval(() => void this.#increase(), 5000 * this.scale));
    this.#timers.push(setInterval(() => void this.#decrease(), 30_000 * this.scale));
    await this.#increase();
  }

  /** Addresses of running pods (what ipamd's checkpoint keeps over a restart). */
  get used(): ReadonlySet<string> {
    return this.#used;
  }

  /** Whether at least one ENI's worth of addresses is available (the warm target). */
  atWarmTarget(): boolean {
    return this.#available().length >= this.#perEni ||
      this.#enis.length >= this.#maxEnis;
  }

  /** Stops the loops. */
  stop(): void {
    for (const t of this.#timers) clearInterval(t);
  }

  #available(now = performance.now()): string[] {
    return this.#enis.flatMap((e) => e.ips).filter((ip) =>
      !this.#used.has(ip) && (this.#cooling.get(ip) ?? 0) <= now
    );
  }

  /** ADD: an address, waiting for the pool when it is empty (until `timeoutMs`, then throws). */
  async add(timeoutMs = Infinity): Promise<{ ip: string; waitedMs: number }> {
    const t0 = performance.now();
    for (;;) {
      if (performance.now() - t0 > timeoutMs) {
        throw new Error(`no address within ${Math.round(timeoutMs)} ms`);
      }
      const ip = this.#available()[0];
      if (ip) {
        this.#used.add(ip);
        return { ip, waitedMs: performance.now() - t0 };
      }
      void this.#increase();
      await new Promise<void>((r) => {
        this.#waiters.push(r);
        setTimeout(r, 200 * this.scale);
      });
    }
  }

  /** DEL: the address cools down for 30 s. */
  del(ip: string): void {
    this.#used.delete(ip);
    this.#cooling.set(ip, performance.now() + 30_000 * this.scale);
  }

  #wake() {
    for (const w of this.#waiters.splice(0)) w();
  }

  async #increase(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      while (this.#available().length < this.#perEni) {
        let eni = [...this.#enis].reverse().find((e) => e.ips.length < this.#perEni);
        if (!eni) {
          if (this.#enis.length >= this.#maxEnis) return;
          eni = await this.#newEni();
          this.#wake();
          if (eni.ips.length >= this.#perEni) continue;
        }
        const ips = await this.cloud.assignIps({
          eniId: eni.id,
          count: this.#perEni - eni.ips.length,
        });
        eni.ips.push(...ips);
        this.#wake();
      }
    } catch {
      // ipamd logs and tries again on the next tick
    } finally {
      this.#busy = false;
    }
  }

  async #newEni(): Promise<Eni> {
    const used = new Set(this.#enis.map((e) => e.deviceIndex));
    let deviceIndex = 1;
    while (used.has(deviceIndex)) deviceIndex++;
    const created = await this.cloud.createEni({
      subnetId: this.#subnetId,
      securityGroupIds: this.#sgs,
      description: "aws-K8S-baseline",
      tags: { "node.k8s.amazonaws.com/instance_id": this.#instanceId },
      clientToken: crypto.randomUUID(),
      secondaryIpCount: this.#perEni,
    });
    const attachmentId = await this.cloud.attachEni({
      eniId: created.id,
      instanceId: this.#instanceId,
      deviceIndex,
    });
    while (!(await this.cloud.attachedMacs()).includes(created.mac.toLowerCase())) {
      await new Promise((r) => setTimeout(r, 100));
    }
    await this.cloud.setDeleteOnTermination({ eniId: created.id, attachmentId });
    const eni: Eni = {
      id: created.id,
      deviceIndex,
      attachmentId,
      ips: created.privateIps.slice(1),
    };
    this.#enis.push(eni);
    return eni;
  }

  async #decrease(): Promise<void> {
    if (this.#busy) return;
    const now = performance.now();
    if (this.#available(now).length < 2 * this.#perEni) return;
    const idle = [...this.#enis].reverse().find((e) =>
      e.deviceIndex > 0 &&
      e.ips.every((ip) => !this.#used.has(ip) && (this.#cooling.get(ip) ?? 0) <= now)
    );
    if (!idle?.attachmentId) return;
    this.#busy = true;
    try {
      this.#enis = this.#enis.filter((e) => e !== idle);
      await this.cloud.detachEni(idle.attachmentId);
      for (;;) {
        const [d] = await this.cloud.describeEnis([idle.id]);
        if (!d || d.status === "available") break;
        await new Promise((r) => setTimeout(r, 100));
      }
      await this.cloud.deleteEni(idle.id);
    } catch {
      // left for the next pass
    } finally {
      this.#busy = false;
    }
  }
}
