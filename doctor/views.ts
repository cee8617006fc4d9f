/**
 * The tables of `doctor enis`, `doctor pods` and `doctor subnets`, as text (80 columns)
 * and as JSON rows.
 *
 * @module
 */
import type { Subnet } from "../aws/ec2.ts";
import type { Facts } from "./facts.ts";
import { poolSubnets } from "./checks.ts";
import { table, wrap } from "./report.ts";
import { visible } from "./printable.ts";

/** One row of `doctor enis`. */
export interface EniRow {
  eni: string;
  device: number;
  subnet: string;
  pool: string;
  securityGroups: string[];
  used: number;
  free: number;
  cooling: number;
}

/** ENI rows: addresses used by pods, free, and cooling down. */
export function eniRows(f: Facts): EniRow[] {
  // Addresses held for pods no allocation names (a lost checkpoint) are in use too.
  const held = new Set([...f.allocations.map((a) => a.ip), ...f.routedUnknown]);
  const cooling = new Set(f.cooldowns.map((c) => c.ip));
  return [...f.enis].sort((a, b) => a.deviceIndex - b.deviceIndex).map((e) => {
    const used = e.ips.filter((ip) => held.has(ip)).length;
    const cool = e.ips.filter((ip) => !held.has(ip) && cooling.has(ip)).length;
    return {
      eni: e.id,
      device: e.deviceIndex,
      subnet: e.subnetId,
      pool: e.pool ?? (f.source === "daemon" ? "-" : "?"),
      // The daemon lists SGs per pool (an ENI has its pool's); IMDS lists them per ENI.
      securityGroups: e.securityGroupIds ??
        f.pools.find((p) => p.name === e.pool)?.securityGroupIds ?? [],
      used,
      free: e.ips.length - used - cool,
      cooling: cool,
    };
  });
}

/**
 * The `doctor enis` table. ENI and subnet ids are never cut (people copy them), so when
 * the security groups do not fit in 80 columns they move under the table, one ENI a line.
 */
export function enisTable(rows: EniRow[]): string {
  const sgs = (r: EniRow) => r.securityGroups.join(",") || "-";
  const cells = (r: EniRow, withSgs: boolean) => [
    r.eni,
    String(r.device),
    r.subnet,
    r.pool,
    ...(withSgs ? [sgs(r)] : []),
    String(r.used),
    String(r.free),
    String(r.cooling),
  ];
  const head = ["ENI", "DEV", "SUBNET", "POOL", "USED", "FREE", "COOL"];
  const wide = table(
    ["ENI", "DEV", "SUBNET", "POOL", "SGS", "USED", "FREE", "COOL"],
    rows.map((r) => cells(r, true)),
    Infinity,
  );
  if (wide.split("\n").every((l) => l.length <= 80)) return wide;
  const narrow = table(head, rows.map((r) => cells(r, false)), 80, [3]);
  const below = rows.flatMap((r) => wrap(visible(`${r.eni} security groups: ${sgs(r)}`), 80));
  return [narrow, "", ...below].join("\n");
}

/** The `doctor pods` table. */
export function podsTable(f: Facts): string {
  return table(
    ["POD", "IP", "ENI", "POOL", "CONTAINER", "IF"],
    [...f.allocations].sort((a, b) => a.ip.localeCompare(b.ip, "en", { numeric: true })).map((
      a,
    ) => [
      a.podNamespace && a.podName ? `${a.podNamespace}/${a.podName}` : "-",
      a.ip,
      a.eniId,
      a.pool,
      a.containerId.slice(0, 12),
      a.ifName,
    ]),
    80,
    [0, 4, 3],
  );
}

/** One row of `doctor subnets`. */
export interface SubnetRow {
  subnet: string;
  cidr: string;
  az: string;
  free: number;
  pools: string[];
  tags: Record<string, string>;
}

/** Subnet rows: every subnet of the node's VPC and AZ, with the pools that may use it. */
export function subnetRows(f: Facts, subnets: Subnet[]): SubnetRow[] {
  const byPool = poolSubnets(f, subnets);
  return subnets.map((s) => ({
    subnet: s.subnetId,
    cidr: s.cidr,
    az: s.az,
    free: s.availableIpCount,
    pools: [...byPool].filter(([, l]) => l.some((x) => x.subnetId === s.subnetId)).map(([p]) => p),
    tags: s.tags,
  })).sort((a, b) => b.pools.length - a.pools.length || a.subnet.localeCompare(b.subnet));
}

/** The `doctor subnets` table. */
export function subnetsTable(rows: SubnetRow[]): string {
  return table(
    ["SUBNET", "CIDR", "AZ", "FREE", "POOLS", "TAGS"],
    rows.map((r) => [
      r.subnet,
      r.cidr,
      r.az,
      String(r.free),
      r.pools.join(",") || "-",
      Object.entries(r.tags).map(([k, v]) => `${k}=${v}`).join(",") || "-",
    ]),
    80,
    [5, 4],
  );
}
