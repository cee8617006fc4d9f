/**
 * The daemon's introspection views (GET /v1/pools, /v1/enis, /v1/allocations, /v1/cooldowns,
 * /v1/routed-unknown, /v1/config on its loopback listener), owned by neither side: the daemon
 * builds them (ipam/introspect.ts, checked against these types) and `vpcni doctor` parses them
 * (doctor/facts.ts). zod is fine here: neither the plugin nor its thin client reads them.
 *
 * @module
 */
import { z } from "zod";

/** A pool as /v1/pools shows it. */
export const poolViewSchema = z.object({
  name: z.string(),
  enis: z.number(),
  total: z.number(),
  used: z.number(),
  cooling: z.number(),
  free: z.number(),
  wantFree: z.number().optional(),
  shortfall: z.number().optional(),
  surplus: z.number().optional(),
  growing: z.boolean().optional(),
  exhausted: z.object({
    reason: z.string(),
    since: z.number().optional(),
    detail: z.string().optional(),
  })
    .nullable().optional(),
  securityGroupIds: z.array(z.string()).optional(),
  subnets: z.unknown().optional(),
}).passthrough();

/** A pool as /v1/pools shows it. */
export type PoolView = z.infer<typeof poolViewSchema>;

/** An ENI as /v1/enis shows it. */
export const eniViewSchema = z.object({
  id: z.string(),
  mac: z.string(),
  deviceIndex: z.number(),
  subnetId: z.string(),
  subnetCidr: z.string(),
  pool: z.string().optional(),
  primary: z.boolean().optional(),
  attachmentId: z.string().optional(),
  ips: z.array(z.string()),
  prefixes: z.array(z.string()).optional(),
  full: z.boolean().optional(),
  used: z.number().optional(),
  securityGroupIds: z.array(z.string()).optional(),
}).passthrough();

/** An ENI as /v1/enis shows it. */
export type EniView = z.infer<typeof eniViewSchema>;

/** An allocation as /v1/allocations shows it. */
export const allocationViewSchema = z.object({
  network: z.string(),
  containerId: z.string(),
  ifName: z.string(),
  ip: z.string(),
  eniId: z.string(),
  pool: z.string(),
  netns: z.string().optional(),
  /** The daemon's mount namespace does not reach `netns` (ipam/checkpoint.ts). */
  netnsHidden: z.boolean().optional(),
  podNamespace: z.string().optional(),
  podName: z.string().optional(),
  time: z.number().optional(),
}).passthrough();

/** A cooling address as /v1/cooldowns shows it. */
export const cooldownViewSchema = z.object({
  ip: z.string(),
  eniId: z.string(),
  until: z.number(),
});

/** /v1/routed-unknown: addresses the daemon holds for running pods no allocation names. */
export const routedUnknownViewSchema = z.array(z.ipv4());

/**
 * The parts of the daemon config doctor uses, as /v1/config answers them: the daemon's
 * effective config, every default applied. The defaults live in ipam/config.ts alone; doctor
 * reads them (and a config file) through that schema, never from a copy here.
 */
export const configViewSchema = z.object({
  clusterName: z.string(),
  datapath: z.string(),
  stateDir: z.string(),
  listen: z.string(),
  routeTableBase: z.number(),
  leakedEniGraceSeconds: z.number(),
  region: z.string().optional(),
  ec2Endpoint: z.string().optional(),
  imdsEndpoint: z.string().optional(),
  pools: z.array(
    z.object({
      name: z.string(),
      warmIps: z.number(),
      warmEnis: z.number(),
      minimumIps: z.number(),
      maxEnis: z.number().optional(),
      prefixDelegation: z.boolean(),
      firstInterfaceIndex: z.number(),
      subnets: z.unknown().optional(),
    }).passthrough(),
  ),
}).passthrough();

/** The daemon config as doctor sees it. */
export type ConfigView = z.infer<typeof configViewSchema>;
