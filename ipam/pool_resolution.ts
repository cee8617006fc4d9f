/**
 * The pools checked against the node at start: each matches a subnet in the node's zone, its
 * first interface index is below the instance's ENI limit, every ENI has a route table, and
 * its security groups exist (at most 5 per ENI). Problems are named by knob, all at once.
 *
 * @module
 */
import type {
  InstanceLimits,
  NodeEni,
  NodeMetadata,
  SecurityGroupInfo,
  SubnetInfo,
} from "./cloud.ts";
import { ConfigError, type DaemonConfig, ROUTE_TABLE_SPAN, subnetChoice } from "./config.ts";
import { matchSubnets } from "./subnets.ts";
import { matchesTags, parseSelector } from "./selector.ts";

/** The node as IMDS and EC2 describe it at start. */
export interface NodeFacts {
  node: NodeMetadata;
  limits: InstanceLimits;
  primary: NodeEni;
  /** Every pool uses the node's subnet only, and every ENI is in it: EC2 need not be asked. */
  nodeOnly: boolean;
  subnets: SubnetInfo[];
  groups: SecurityGroupInfo[];
}

/**
 * Checks every pool against the node (a subnet, a first interface index below the limit,
 * route tables for every ENI) and returns each pool's security groups; a {@linkcode
 * ConfigError} naming every problem otherwise.
 */
export function resolvePools(cfg: DaemonConfig, facts: NodeFacts): Map<string, string[]> {
  const { node, limits, primary, subnets } = facts;
  const problems: string[] = [];
  cfg.pools.forEach((p, i) => {
    const matched = matchSubnets(subnetChoice(p), subnets, {
      az: node.az,
      primarySubnetId: primary.subnetId,
    });
    if (matched.length === 0) {
      problems.push(`pools[${i}].subnets: matches no subnet in ${node.az}`);
    }
    if (i === 0 && limits.maxEnis > ROUTE_TABLE_SPAN) {
      problems.push(
        `routeTableBase: the instance's ${limits.maxEnis} ENIs need more than the ` +
          `${ROUTE_TABLE_SPAN} route tables this daemon reserves from routeTableBase`,
      );
    }
    if (p.firstInterfaceIndex >= limits.maxEnis) {
      problems.push(
        `pools[${i}].firstInterfaceIndex: ${p.firstInterfaceIndex} is not below the ` +
          `instance's ${limits.maxEnis} ENIs`,
      );
    }
  });
  if (problems.length) throw new ConfigError("pools resolved against EC2", problems);
  return resolveSecurityGroups(cfg, primary.securityGroupIds, facts.groups);
}

/** Resolves each pool's security groups; errors name the pool's knob. */
function resolveSecurityGroups(
  cfg: DaemonConfig,
  primarySgs: string[],
  groups: SecurityGroupInfo[],
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const problems: string[] = [];
  cfg.pools.forEach((p, i) => {
    const sg = p.securityGroups;
    if (sg === "primary") out.set(p.name, primarySgs);
    else if ("ids" in sg) {
      const missing = sg.ids.filter((id) => !groups.some((g) => g.id === id));
      if (missing.length) {
        problems.push(`pools[${i}].securityGroups: no such security group ${missing.join(", ")}`);
      }
      out.set(p.name, sg.ids);
    } else {
      const sel = parseSelector(sg.tags);
      const ids = groups.filter((g) => matchesTags(sel, g.tags)).map((g) => g.id);
      if (ids.length === 0) {
        problems.push(`pools[${i}].securityGroups: tag selector "${sg.tags}" matches no group`);
      } else if (ids.length > 5) {
        problems.push(
          `pools[${i}].securityGroups: tag selector "${sg.tags}" matches ${ids.length} groups ` +
            `(an ENI takes at most 5)`,
        );
      }
      out.set(p.name, ids.slice(0, 5));
    }
  });
  if (problems.length) throw new ConfigError("pools resolved against EC2", problems);
  return out;
}
