/**
 * Introspection and metrics on loopback: GET /v1/pools, /v1/enis, /v1/allocations,
 * /v1/cooldowns, /v1/routed-unknown, /v1/config, /v1/device-plugin, /healthz, /readyz and
 * Prometheus /metrics.
 *
 * @module
 */
import type { DaemonConfig } from "./config.ts";
import type { NodeView } from "./node_view.ts";
import type { EniView, PoolView } from "../proto/introspect.ts";

/** Builds the pools view (also what doctor reads: proto/introspect.ts). */
export function poolsView(view: NodeView) {
  return view.pools().map((rt): PoolView & Record<string, unknown> => {
    const pool = rt.cfg.name;
    const { s, ...w } = view.warm(pool);
    const g = view.growth(pool);
    return {
      name: pool,
      ...s,
      wantFree: w.wantFree,
      demandFree: view.demandFree(pool),
      eniLatencyMs: Math.round(g.eniLatencyMs),
      shortfall: w.shortfall,
      surplus: w.surplus,
      growing: g.growing,
      exhausted: g.exhausted ?? null,
      securityGroupIds: rt.securityGroupIds,
      subnets: rt.choice.kind === "tags" ? { tags: rt.choice.selector.text } : rt.choice,
    };
  });
}

/** Refreshes the scrape-time metrics from the live state. */
export function refreshMetrics(view: NodeView): void {
  const m = view.metrics;
  for (const rt of view.pools()) {
    const pool = rt.cfg.name;
    const s = view.stats(pool);
    const exhausted = view.growth(pool).exhausted;
    for (const state of ["total", "used", "free", "cooling"] as const) {
      m.poolIps.set({ pool, state }, s[state]);
    }
    m.poolEnis.set({ pool }, s.enis);
    for (const reason of ["subnet_full", "eni_limit"] as const) {
      m.poolExhausted.set({ pool, reason }, exhausted?.reason === reason ? 1 : 0);
    }
  }
  // The client's own totals only grow: copying them keeps each series a counter.
  const c = view.callCounts();
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
  /** The device plugin: registration and each pool's advertised capacity, or why it is off. */
  devicePlugin?: () => unknown;
  /** Why no pod can start although the daemon runs (then /readyz answers 503 with it). */
  podsBlocked?: () => string | undefined;
}

/** Serves introspection on `listen` (loopback, checked by the config schema). */
export function serveIntrospection(
  listen: string,
  cfg: DaemonConfig,
  view: NodeView,
  ready: () => boolean,
  extras: IntrospectionExtras = {},
): Deno.HttpServer<Deno.NetAddr> {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(listen)!;
  return Deno.serve({ hostname: m[1], port: Number(m[2]), onListen: () => {} }, async (req) => {
    if (req.method !== "GET") return new Response("method not allowed\n", { status: 405 });
    const path = new URL(req.url).pathname;
    switch (path) {
      case "/healthz":
        return new Response("ok\n");
      case "/readyz": {
        if (!ready()) return new Response("starting\n", { status: 503 });
        const blocked = extras.podsBlocked?.();
        return blocked
          ? new Response(`not ready: ${blocked}\n`, { status: 503 })
          : new Response("ready\n");
      }
      case "/v1/pools":
        return Response.json(poolsView(view));
      case "/v1/enis":
        return Response.json(view.enis() satisfies EniView[]);
      case "/v1/allocations":
        return Response.json(view.allocations());
      case "/v1/routed-unknown":
        return Response.json(view.routedUnknown());
      case "/v1/cooldowns":
        return Response.json(view.cooldowns());
      case "/v1/config":
        return Response.json(cfg);
      case "/v1/device-plugin": {
        const view = extras.devicePlugin?.();
        return Response.json(view ?? { enabled: false });
      }
      case "/metrics": {
        refreshMetrics(view);
        return new Response(await view.metrics.registry.metrics(), {
          headers: { "content-type": view.metrics.registry.contentType },
        });
      }
      default:
        return new Response(`no such endpoint ${path}\n`, { status: 404 });
    }
  });
}
