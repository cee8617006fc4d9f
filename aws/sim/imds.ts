/**
 * IMDSv2 of one simulated instance: `PUT /latest/api/token` hands out a token with a TTL,
 * every `GET` must carry it (401 otherwise), and the metadata tree shows the instance's
 * ENIs only once their attach completed plus `imdsDelayMs`, as the real service lags.
 *
 * @module
 */
import type { EniState, SimState } from "./state.ts";
import { formatIpv4Cidr, parseIpv4Network } from "../../base/ipv4.ts";
import { azId, privateDnsName } from "./ec2_xml.ts";

const TTL_HEADER = "x-aws-ec2-metadata-token-ttl-seconds";
const TOKEN_HEADER = "x-aws-ec2-metadata-token";

function text(body: string, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(body, {
    status,
    // Connections stay open for the next read (the real IMDS keeps them too): the project's
    // client reads every body, so its pool reuses them. Closing each one after its answer
    // left a thousand simulated nodes' polls tens of thousands of sockets in TIME_WAIT.
    headers: { "content-type": "text/plain", ...headers },
  });
}

const notFound = () => text("Not Found", 404);

/** Serves the IMDS of one instance; keeps its own tokens. */
export class ImdsHandler {
  #tokens = new Map<string, number>();
  constructor(readonly state: SimState, readonly instanceId: string) {}

  /** Answers one HTTP request. */
  handle(req: Request): Response {
    // Clients join an endpoint's "/" with absolute paths ("//latest/…"); IMDS tolerates it.
    const pathname = new URL(req.url).pathname.replace(/\/{2,}/g, "/");
    if (pathname === "/latest/api/token") {
      if (req.method !== "PUT") return text("Method Not Allowed", 405);
      if (req.headers.has("x-forwarded-for")) return text("Forbidden", 403);
      const ttlText = req.headers.get(TTL_HEADER);
      const ttl = ttlText !== null && /^\d+$/.test(ttlText) ? Number(ttlText) : NaN;
      if (!(ttl >= 1 && ttl <= 21600)) return text("Bad Request", 400);
      const token = btoa(crypto.getRandomValues(new Uint8Array(30)).join(",")).slice(0, 56);
      this.#tokens.set(token, Date.now() + ttl * 1000);
      return text(token, 200, { [TTL_HEADER]: String(ttl) });
    }
    if (req.method !== "GET" && req.method !== "HEAD") return text("Method Not Allowed", 405);
    const token = req.headers.get(TOKEN_HEADER);
    const expiry = token === null ? undefined : this.#tokens.get(token);
    if (expiry === undefined || expiry < Date.now()) {
      if (token !== null) this.#tokens.delete(token);
      return text("Unauthorized", 401);
    }
    const body = this.lookup(pathname);
    return body === undefined ? notFound() : text(body);
  }

  /** The metadata value at a path, or undefined (404). Exposed for tests. */
  lookup(pathname: string): string | undefined {
    const s = this.state;
    const inst = s.instances.get(this.instanceId);
    if (!inst) return undefined;
    const path = pathname.replace(/\/+$/, "");
    if (path === "/latest/dynamic/instance-identity/document") {
      return JSON.stringify(
        {
          accountId: s.accountId,
          architecture: "x86_64",
          availabilityZone: inst.az,
          imageId: "ami-00000000000000000",
          instanceId: inst.id,
          instanceType: inst.limits.type,
          privateIp: this.#primaryIp(),
          region: s.region,
          version: "2017-09-30",
        },
        null,
        2,
      );
    }
    const md = "/latest/meta-data";
    if (path !== md && !path.startsWith(md + "/")) return undefined;
    const rel = path.slice(md.length + 1);
    const now = Date.now();
    // Only the keys that need the instance's ENIs look them up.
    let shown: EniState[] | undefined;
    const visible = () => shown ??= this.visibleEnis(now);
    const primaryIp = () => this.#primaryIp();
    const top: Record<string, () => string | undefined> = {
      "": () =>
        [
          "ami-id",
          "hostname",
          "instance-id",
          "instance-type",
          "local-hostname",
          "local-ipv4",
          "mac",
          "network/",
          "placement/",
          "security-groups",
        ].join("\n"),
      "ami-id": () => "ami-00000000000000000",
      "instance-id": () => inst.id,
      "instance-type": () => inst.limits.type,
      "hostname": () => primaryIp() && privateDnsName(s.region, primaryIp()!),
      "local-hostname": () => primaryIp() && privateDnsName(s.region, primaryIp()!),
      "local-ipv4": () => primaryIp(),
      "mac": () => visible().find((e) => e.attachment!.deviceIndex === 0)?.mac,
      "security-groups": () =>
        inst.securityGroupIds.map((g) => s.securityGroups.get(g)?.name ?? g).join("\n"),
      "placement": () => "availability-zone\navailability-zone-id\nregion",
      "placement/availability-zone": () => inst.az,
      "placement/availability-zone-id": () => azId(s.region, inst.az),
      "placement/region": () => s.region,
      "network": () => "interfaces/",
      "network/interfaces": () => "macs/",
      "network/interfaces/macs": () => visible().map((e) => `${e.mac}/`).join("\n"),
    };
    if (Object.hasOwn(top, rel)) return top[rel]();
    const m = /^network\/interfaces\/macs\/([0-9a-f:]{17})(?:\/(.*))?$/.exec(rel);
    if (!m) return undefined;
    const eni = visible().find((e) => e.mac === m[1]);
    if (!eni) return undefined;
    return this.#macValue(eni, m[2] ?? "", now);
  }

  /** ENIs IMDS shows now: attach completed at least `imdsDelayMs` ago. */
  visibleEnis(now = Date.now()): EniState[] {
    const delay = this.state.faults.imdsDelayMs;
    return this.state.enisOf(this.instanceId).filter((e) => {
      const a = e.attachment!;
      return a.status !== "attaching" && a.attachedAt !== undefined && a.attachedAt + delay <= now;
    });
  }

  #primaryIp(): string | undefined {
    const e = this.state.enisOf(this.instanceId).find((x) => x.attachment!.deviceIndex === 0);
    return e?.privateIps.find((x) => x.primary)?.address;
  }

  #macValue(eni: EniState, key: string, now: number): string | undefined {
    const s = this.state;
    const delay = s.faults.imdsDelayMs;
    const subnet = s.subnets.get(eni.subnetId)!;
    const ips = eni.privateIps.filter((x) => x.primary || x.assignedAt + delay <= now).map((x) =>
      x.address
    );
    const prefixes = eni.prefixes.filter((p) => p.assignedAt + delay <= now).map((p) => p.cidr);
    const values: Record<string, () => string | undefined> = {
      "device-number": () => String(eni.attachment!.deviceIndex),
      "interface-id": () => eni.id,
      "ipv4-prefix": () => prefixes.length > 0 ? prefixes.join("\n") : undefined,
      "local-hostname": () => privateDnsName(s.region, ips[0]),
      "local-ipv4s": () => ips.join("\n"),
      "mac": () => eni.mac,
      "network-card": () => String(eni.attachment!.networkCardIndex),
      "owner-id": () => s.accountId,
      "security-group-ids": () => eni.groupIds.join("\n"),
      "security-groups": () =>
        eni.groupIds.map((g) => s.securityGroups.get(g)?.name ?? g).join("\n"),
      "subnet-id": () => eni.subnetId,
      "subnet-ipv4-cidr-block": () => formatIpv4Cidr(subnet.cidr),
      "vpc-id": () => eni.vpcId,
      "vpc-ipv4-cidr-block": () => s.vpc.cidrs[0],
      "vpc-ipv4-cidr-blocks": () =>
        s.vpc.cidrs.map((c) => formatIpv4Cidr(parseIpv4Network(c)!)).join("\n"),
    };
    if (key === "") {
      return Object.keys(values).filter((k) => values[k]() !== undefined).join("\n");
    }
    return key in values ? values[key]() : undefined;
  }
}
