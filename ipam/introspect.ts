/**
 * Introspection and metrics on loopback: GET /v1/pools, /v1/enis, /v1/allocations,
 * /v1/cooldowns, /v1/routed-unknown, /v1/config, /v1/device-plugin, /healthz, /readyz and
 * Prometheus /metrics.
 *
 * @module
 */
import type { DaemonConfig } from "./config.ts";
import type { PoolManager } from "./pools.ts";
import type { EniView, PoolView } from "../proto/introspect.ts";

/** Builds the pools view (also what doctor reads: proto/introspect.ts). */
export function poolsView(pools: PoolManager) {
  return [...pools.pools.values()].map((rt): PoolView & Record<string, unknown> => {
    const { s, ...w } = pools.shortfallOf(rt);
    return {
      name: rt.cfg.name,
      ...s,
      wantFree: w.wantFree,
      demandFree: pools.demandFree(rt),
      eniLatencyMs: Math.round(rt.eniLatencyMs),
      shortfall: w.shortfall,
      surplus: w.surplus,
      growing: rt.growing !== undefined,
      exhausted: rt.exhausted ?? null,
      securityGroupIds: rt.securityGroupIds,
      subnets: rt.choice.kind === "tags" ? { tags: rt.choice.selector.text } : rt.choice,
    };
  });
}

/** Refreshes the scrape-time metrics from the live state. */
export function refreshMetrics(pools: PoolManager): void {
  const m = pools.ctx.metrics;
  const now = pools.ctx.now();
  for (const rt of pools.pools.values()) {
    const pool = rt.cfg.name;
    const s = pools.ctx.state.stats(pool, now);
    for (const state of ["total", "used", "free", "cooling"] as const) {
      m.poolIps.set({ pool, state }, s[state]);
    }
    m.poolEnis.set({ pool }, s.enis);
    for (const reason of ["subnet_full", "eni_limit"] as const) {
      m.poolExhausted.set({ pool, reason }, rt.exhausted?.reason === reason ? 1 : 0);
    }
  }
  // The client's own totals only grow: copying them keeps each series a counter.
  const c = pools.ctx.cloud.callCounts();
  m.ec2Calls.reset();
  for (const [action, n] of c.calls) m.ec2Calls.inc({ action }, n);
  m.ec2Errors.reset();
  for (const [k, n] of c.errors) {
    const [action, code] = k.split(":");
    m.ec2Errors.inc({ action, code: code ?? "Unknown" }, n);
  }
  m.ec2Throttles.reset();
  m.ec2Throttles.inc(c.throttles);
  const mem = Deno.memoryUsage();
  m.memory.set({ kind: "rss" }, mem.rss);
  m.memory.set({ kind: "heap_used" }, mem.heapUsed);
  m.memory.set({ kind: "heap_total" }, mem.heapTotal);
}

/** Views of optional parts of the daemon; undefined while a part is off. */
export interface IntrospectionExtras {
  /** The device plugin: registration and each pool's advertised capacity. */
  devicePlugin?: () => unknown;
}

/** Serves introspection on `listen` (loopback, checked by the config schema). */
export function serveIntrospection(
  listen: string,
  cfg: DaemonConfig,
  pools: PoolManager,
  ready: () => boolean,
  extras: IntrospectionExtras = {},
): Deno.HttpServer<Deno.NetAddr> {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(listen)!;
  return Deno.serve({ hostname: m[1], port: Number(m[2]), onListen: () => {} }, async (req) => {
    if (req.method !== "GET") return new Response("method not allowed\n", { status: 405 });
    const path = new URL(req.url).pathname;
    const now = pools.ctx.now();
    switch (path) {
      case "/healthz":
        return new Response("ok\n");
      case "/readyz":
        return ready() ? new Response("ready\n") : new Response("starting\n", { status: 503 });
      case "/v1/pools":
        return Response.json(poolsView(pools));
      case "/v1/enis":
        return Response.json(
          [...pools.ctx.state.enis.values()].map((e): EniView => ({
            ...e,
            ips: [...e.ips],
            used: [...e.ips].filter((ip) => pools.ctx.state.holder.has(ip)).length,
          })),
        );
      case "/v1/allocations":
        return Response.json([...pools.ctx.state.allocations.values()]);
      case "/v1/routed-unknown":
        return Response.json([...pools.ctx.state.routedUnknown].sort());
      case "/v1/cooldowns":
        return Response.json([...pools.ctx.state.cooldowns.values()].filter((c) => c.until > now));
      case "/v1/config":
        return Response.json(cfg);
      case "/v1/device-plugin": {
        const view = extras.devicePlugin?.();
        return Response.json(view === undefined ? { enabled: false } : { enabled: true, ...view });
      }
      case "/metrics": {
        refreshMetrics(pools);
        return new Response(await pools.ctx.metrics.registry.metrics(), {
          headers: { "content-type": pools.ctx.metrics.registry.contentType },
        });
      }
      default:
        return new Response(`no such endpoint ${path}\n`, { status: 404 });
    }
  });
}
