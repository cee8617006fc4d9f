/**
 * The device-plugin check: whether the daemon is registered with the kubelet, and each
 * pool's capacity as the scheduler sees it (`vpcni.io/<pool>`), in one line; a failure when
 * no pod can start because the kubelet's pod-resources API must be asked and does not
 * answer. Read from the daemon's `/v1/device-plugin` introspection.
 *
 * @module
 */
import { z } from "zod";
import type { CheckResult } from "./report.ts";

const viewSchema = z.union([
  z.object({ enabled: z.literal(false), reason: z.string().optional() }),
  z.object({
    enabled: z.literal(true),
    registered: z.boolean(),
    registrations: z.number(),
    lastError: z.string().optional(),
    podResourcesKnown: z.boolean(),
    podResourcesError: z.string().optional(),
    podsBlocked: z.string().optional(),
    pools: z.array(z.object({
      pool: z.string(),
      resource: z.string(),
      devices: z.number().optional(),
      room: z.number().optional(),
      heldByDevicePods: z.number().optional(),
    })),
  }),
]);

/** The daemon's device-plugin view, as `/v1/device-plugin` gives it. */
export type DevicePluginView = z.infer<typeof viewSchema>;

/** Reads `/v1/device-plugin`; a string says why it could not. */
export async function fetchDevicePluginView(
  daemonUrl: string,
  timeoutMs: number,
): Promise<DevicePluginView | string> {
  try {
    const r = await fetch(`${daemonUrl}/v1/device-plugin`, {
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (r.status === 404) {
      await r.body?.cancel();
      return "the daemon is older than the device plugin";
    }
    if (!r.ok) {
      await r.body?.cancel();
      return `/v1/device-plugin: HTTP ${r.status}`;
    }
    const parsed = viewSchema.safeParse(await r.json());
    return parsed.success ? parsed.data : "/v1/device-plugin: unexpected answer";
  } catch (e) {
    return (e as Error).message;
  }
}

/** One pool as the line shows it: `vpcni.io/a 9 (2 free to schedule)`. */
function poolText(p: Extract<DevicePluginView, { enabled: true }>["pools"][number]): string {
  if (p.devices === undefined) return `${p.resource} not computed yet`;
  return `${p.resource} ${p.devices} (${p.room ?? 0} room, ${p.heldByDevicePods ?? 0} held)`;
}

/** The check, from the view (or why there is none). */
export function checkDevicePlugin(view: DevicePluginView | string): CheckResult {
  const base = { id: "device-plugin", title: "pool capacity (kubelet)" };
  if (typeof view === "string") return { ...base, status: "skip", found: view };
  if (!view.enabled) {
    return {
      ...base,
      status: "skip",
      found: "off: pool capacity is not advertised to the scheduler (knob devicePlugin)",
      ...(view.reason ? { details: [view.reason] } : {}),
    };
  }
  const pools = view.pools.map(poolText).join(", ");
  if (view.podsBlocked) {
    // The daemon's /readyz and STATUS say the same: no pod starts until this is fixed.
    return {
      ...base,
      status: "fail",
      found: "pods cannot start: the kubelet's pod-resources API does not answer",
      details: [view.podsBlocked, pools],
      fix: "mount the kubelet's pod-resources directory into the daemon (podResourcesSocket), " +
        "or set devicePlugin: off where no pod requests vpcni.io/* resources",
    };
  }
  if (!view.registered) {
    return {
      ...base,
      status: "warn",
      found: `not registered with the kubelet${view.lastError ? ` (${view.lastError})` : ""}`,
      details: [pools],
      fix: "check that the kubelet runs and that the daemon sees its device-plugin directory " +
        "(devicePluginDir, mounted from the host's /var/lib/kubelet/device-plugins)",
    };
  }
  if (view.podResourcesError) {
    return {
      ...base,
      status: "warn",
      found: pools,
      details: [`pod-resources: ${view.podResourcesError}`],
      fix: "mount the kubelet's pod-resources directory into the daemon (podResourcesSocket); " +
        "without it pods' devices are not matched to their addresses",
    };
  }
  return { ...base, status: "ok", found: pools };
}
