/**
 * A minimal stand-in for the IPAM daemon (`vpcni serve`): it speaks proto/ipam.ts over a
 * unix socket and hands out addresses from a fixed list, all on one primary ENI. It stands
 * in for the daemon's pools (no EC2 logic, no cooldown, no checkpoint); the invocations the
 * thin plugin forwards (`cni`) run on the daemon's own CNI service (ipam/cni_service.ts),
 * whose reservation requests this stand-in answers.
 *
 * @module
 */
import {
  type EniInfo,
  IPAM_PATH,
  IPAM_PROTOCOL_VERSION,
  type IpamRequest,
  type IpamResponse,
  type PodAllocation,
} from "../../proto/ipam.ts";
import { CniService } from "../../ipam/cni_service.ts";
import { serveNetnsFdsFor } from "../../ipam/netns_fds.ts";

/** How the stand-in is set up. */
export interface StandinOptions {
  /** Socket path to listen on. */
  socket: string;
  /** Addresses to hand out, in order. */
  addresses: string[];
  /** Subnet of the addresses (default 10.77.0.0/24) and its gateway (default .1). */
  subnetCidr?: string;
  gateway?: string;
  /** MAC of the ENI link the addresses belong to (ipvlan finds its parent by it). */
  eniMac?: string;
  /** Node addresses reported to the plugin. */
  nodeIps?: string[];
  /** When false, STATUS reports that the pool cannot grow (default true). */
  canGrow?: boolean;
  /** Device index of the ENI (default 0, the primary; others get table 100 + index). */
  deviceIndex?: number;
  /**
   * The test node's netns: the CNI service's workers act from there, as the daemon acts from
   * the node's netns (the plugin runs there too). Without it, from the test's own netns.
   */
  nodeNetns?: string;
  /**
   * Answer as a daemon of the previous release, which spoke protocol 1 only: an invocation
   * (`cni`, protocol 2) is refused with that release's words, code 1.
   */
  protocol1Only?: boolean;
  /**
   * Answer as a daemon of the release before the netns hand-over: where this one asks the
   * plugin for a netns it cannot see, that one ran the verb and printed the plugin's refusal
   * (the words of cni/netns_file.ts, code 4). A stand-in of that answer, as that release's
   * daemon is not at hand.
   */
  beforeNetnsHandOver?: boolean;
  /** Called with each request before it is answered (tests look at the kernel then). */
  onRequest?: (req: IpamRequest) => void | Promise<void>;
}

/** A running stand-in. */
export interface IpamStandin {
  /** Current reservations, keyed by `network/containerId/ifName`. */
  readonly reservations: Map<string, PodAllocation>;
  /** Every request received, in order. */
  readonly requests: IpamRequest[];
  /** Stops listening and removes the socket. */
  close(): Promise<void>;
}

/**
 * Starts a stand-in daemon on `opts.socket`, with the daemon's netns socket beside it
 * (ipam/netns_fds.ts) once `netnsFds` settles.
 */
export function startIpamStandin(
  opts: StandinOptions,
): IpamStandin & { netnsFds: Promise<unknown> } {
  const subnetCidr = opts.subnetCidr ?? "10.77.0.0/24";
  const gateway = opts.gateway ?? subnetCidr.replace(/\.\d+\/\d+$/, ".1");
  const eni: EniInfo = {
    id: "eni-0standin000000001",
    mac: opts.eniMac ?? "02:00:00:77:00:01",
    deviceIndex: opts.deviceIndex ?? 0,
    primary: (opts.deviceIndex ?? 0) === 0,
    subnetId: "subnet-0standin00000001",
    subnetCidr,
    gateway,
    routeTable: 100 + (opts.deviceIndex ?? 0),
  };
  const reservations = new Map<string, PodAllocation>();
  const requests: IpamRequest[] = [];
  const free = [...opts.addresses];

  const answer = (req: IpamRequest): IpamResponse => {
    if (req.op === "cni") return { ok: false, code: 6, msg: "cni is not a reservation request" };
    if (req.version !== IPAM_PROTOCOL_VERSION) {
      return {
        ok: false,
        code: 102,
        msg: `protocol version ${String((req as { version: unknown }).version)} not spoken`,
      };
    }
    switch (req.op) {
      case "add": {
        const k = `${req.network}/${req.containerId}/${req.ifName}`;
        const held = reservations.get(k);
        if (held) {
          // As the daemon does: a second ADD without a DEL is refused, the address kept.
          return {
            ok: false,
            code: 106,
            msg: `${req.containerId}/${req.ifName} already holds ${held.ip}`,
          };
        }
        const ip = free.shift();
        if (!ip) return { ok: false, code: 11, msg: "no free address in the stand-in pool" };
        const allocation: PodAllocation = {
          network: req.network,
          containerId: req.containerId,
          ifName: req.ifName,
          ip,
          pool: "default",
          eni,
          vpcCidrs: [subnetCidr],
          nodeIps: opts.nodeIps ?? [],
          nodeEniMacs: [eni.mac],
        };
        reservations.set(k, allocation);
        return { ok: true, allocation };
      }
      case "del": {
        const k = `${req.network}/${req.containerId}/${req.ifName}`;
        const held = reservations.get(k);
        if (!held) return { ok: true, released: [] };
        reservations.delete(k);
        free.push(held.ip);
        return { ok: true, released: [held] };
      }
      case "check": {
        const held = reservations.get(`${req.network}/${req.containerId}/${req.ifName}`);
        if (!held) {
          return { ok: false, code: 3, msg: `no reservation for ${req.containerId}/${req.ifName}` };
        }
        return { ok: true, allocation: held };
      }
      case "gc": {
        const valid = new Set(
          req.validAttachments.map((a) => `${req.network}/${a.containerId}/${a.ifName}`),
        );
        const released: PodAllocation[] = [];
        for (const [k, a] of reservations) {
          if (a.network === req.network && !valid.has(k)) {
            reservations.delete(k);
            free.push(a.ip);
            released.push(a);
          }
        }
        return { ok: true, released };
      }
      case "stale": {
        const valid = new Set(
          req.validAttachments.map((a) => `${req.network}/${a.containerId}/${a.ifName}`),
        );
        return {
          ok: true,
          stale: [...reservations].filter(([k, a]) => a.network === req.network && !valid.has(k))
            .map(([, a]) => a),
        };
      }
      case "status":
        return { ok: true, pool: "default", available: free.length, canGrow: opts.canGrow ?? true };
    }
  };

  const reserve = async (req: IpamRequest): Promise<IpamResponse> => {
    requests.push(req);
    await opts.onRequest?.(req);
    return answer(req);
  };
  const cni = new CniService((body) => reserve(JSON.parse(body)), { netns: opts.nodeNetns });
  const server = Deno.serve({ path: opts.socket, onListen() {} }, async (request) => {
    const url = new URL(request.url);
    if (request.method !== "POST" || url.pathname !== IPAM_PATH) {
      return new Response("not found", { status: 404 });
    }
    const req = await request.json() as IpamRequest;
    if (req.op === "cni" && opts.protocol1Only) {
      requests.push(req);
      return Response.json({
        ok: false,
        code: 1,
        msg: `IPAM protocol version ${req.version} is not spoken; this daemon speaks 1`,
      });
    }
    if (req.op === "cni") {
      const answer = await cni.run(req);
      if (opts.beforeNetnsHandOver && !answer.ok && answer.needNetnsFd) {
        const netns = JSON.stringify(req.env.CNI_NETNS);
        return Response.json({
          ok: true,
          version: req.version,
          exitCode: 1,
          stdout: JSON.stringify({
            cniVersion: JSON.parse(req.stdin).cniVersion,
            code: 4,
            msg: `CNI_NETNS ${netns} is a regular file, not a network namespace`,
          }),
        });
      }
      return Response.json(answer);
    }
    return Response.json(await reserve(req));
  });

  const netnsFds = serveNetnsFdsFor(opts.socket, cni);
  return {
    reservations,
    requests,
    netnsFds,
    async close() {
      cni.close();
      await (await netnsFds)?.close();
      await server.shutdown();
      await Deno.remove(opts.socket).catch(() => {});
    },
  };
}
