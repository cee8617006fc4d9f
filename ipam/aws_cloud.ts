/**
 * {@linkcode CloudApi} over the project's real clients: aws/ec2.ts (the SDK with buckets,
 * retries and counters), aws/imds.ts and aws/limits.ts.
 *
 * @module
 */
import { Ec2Client, type NetworkInterface } from "../aws/ec2.ts";
import { ImdsClient, type ImdsClientOptions } from "../aws/imds.ts";
import { embeddedLimits, InstanceLimitsResolver } from "../aws/limits.ts";
import type { CloudApi, EniDescription, NodeMetadata } from "./cloud.ts";
import { log } from "./log.ts";

function toEni(n: NetworkInterface): EniDescription {
  const out: EniDescription = {
    id: n.eniId,
    subnetId: n.subnetId,
    mac: n.mac,
    status: n.status,
    privateIps: n.privateIps.map((p) => p.ip),
    prefixes: n.ipv4Prefixes,
    tags: n.tags,
    securityGroupIds: n.securityGroupIds,
  };
  if (n.attachment) {
    out.attachment = {
      id: n.attachment.attachmentId,
      instanceId: n.attachment.instanceId,
      deviceIndex: n.attachment.deviceIndex,
      status: n.attachment.status,
    };
  }
  return out;
}

/** Options of {@linkcode createAwsCloud}. */
export interface AwsCloudOptions {
  ec2Endpoint?: string;
  imdsEndpoint?: string;
  /** Region; IMDS's answer when absent. */
  region?: string;
  /** Extra options passed to the EC2 client (tests lower the retry delays). */
  ec2?: Partial<ConstructorParameters<typeof Ec2Client>[0]>;
  /** Extra options passed to the IMDS client (the fleet bench's loaded machine is slow). */
  imds?: Omit<ImdsClientOptions, "endpoint">;
}

/** Builds the real cloud: IMDS first (it tells the region), then EC2. */
export async function createAwsCloud(o: AwsCloudOptions): Promise<CloudApi & { close(): void }> {
  const imds = new ImdsClient({
    ...o.imds,
    ...(o.imdsEndpoint ? { endpoint: o.imdsEndpoint } : {}),
  });
  const meta = await imds.getNodeMetadata();
  const ec2 = new Ec2Client({
    region: o.region ?? meta.region,
    endpoint: o.ec2Endpoint,
    onRetry: (e) =>
      log.debug("EC2 {action} retry {attempt} in {delayMs} ms: {code}", {
        action: e.action,
        attempt: e.attempt,
        delayMs: e.delayMs,
        code: e.error.code,
      }),
    ...o.ec2,
  });
  const limits = new InstanceLimitsResolver({
    ec2,
    onFallback: (type, error) =>
      log.warn("DescribeInstanceTypes failed for {type}; using the embedded table: {error}", {
        type,
        error: String(error),
      }),
  });
  let first: NodeMetadata | undefined = meta;
  return {
    close: () => ec2.close(),
    async nodeMetadata() {
      const m = first ?? await imds.getNodeMetadata();
      first = undefined;
      return {
        instanceId: m.instanceId,
        instanceType: m.instanceType,
        az: m.az,
        region: m.region,
        vpcCidrs: m.vpcCidrs,
        enis: m.enis.map((e) => ({
          mac: e.mac,
          deviceIndex: e.deviceIndex,
          eniId: e.eniId,
          subnetId: e.subnetId,
          subnetCidr: e.subnetCidr,
          localIpv4s: e.localIpv4s,
          ipv4Prefixes: e.ipv4Prefixes,
          securityGroupIds: e.securityGroupIds,
        })),
      };
    },
    attachedMacs: () => imds.listMacs(),
    async instanceLimits(type) {
      // The embedded table knows every type EC2 published when it was generated, and the two
      // numbers the daemon needs never change for a type: only a type it lacks costs a call
      // (1,000 nodes starting at once would otherwise run the account's bucket dry).
      const l = embeddedLimits(type) ?? await limits.get(type);
      return { maxEnis: l.maxEnis, ipv4PerEni: l.ipv4PerEni };
    },
    async describeSubnets({ az }) {
      const subnets = await ec2.describeSubnets({ az });
      return subnets.map((s) => ({
        id: s.subnetId,
        cidr: s.cidr,
        az: s.az,
        vpcId: s.vpcId,
        availableIps: s.availableIpCount,
        tags: s.tags,
      }));
    },
    async describeSecurityGroups() {
      const groups = await ec2.describeSecurityGroups({});
      return groups.map((g) => ({ id: g.groupId, name: g.groupName, tags: g.tags }));
    },
    async describeTaggedEnis(tags) {
      return (await ec2.describeNetworkInterfaces({ tags })).map(toEni);
    },
    async describeAttachedEnis(instanceId) {
      return (await ec2.describeNetworkInterfaces({ instanceId })).map(toEni);
    },
    async describeEnis(ids) {
      if (ids.length === 0) return [];
      try {
        return (await ec2.describeNetworkInterfaces({ ids })).map(toEni);
      } catch (e) {
        // By id, one unknown id fails the whole call (and the client waits out EC2's
        // eventual consistency for ENIs it just created); as a filter, unknown ids are absent.
        if ((e as { code?: string }).code !== "InvalidNetworkInterfaceID.NotFound") throw e;
        return (await ec2.describeNetworkInterfaces({ ids, ignoreMissing: true })).map(toEni);
      }
    },
    async createEni(i) {
      return toEni(await ec2.createNetworkInterface(i));
    },
    attachEni: (i) => ec2.attachNetworkInterface(i),
    setDeleteOnTermination: (i) =>
      ec2.modifyNetworkInterfaceAttribute({
        eniId: i.eniId,
        attachmentId: i.attachmentId,
        deleteOnTermination: true,
      }),
    detachEni: (attachmentId) => ec2.detachNetworkInterface({ attachmentId }),
    deleteEni: (eniId) => ec2.deleteNetworkInterface(eniId),
    async assignIps({ eniId, count }) {
      return (await ec2.assignPrivateIpAddresses({ eniId, count })).ips;
    },
    async assignPrefixes({ eniId, count }) {
      return (await ec2.assignPrivateIpAddresses({ eniId, prefixCount: count })).prefixes;
    },
    unassignIps: ({ eniId, ips }) => ec2.unassignPrivateIpAddresses({ eniId, ips }),
    unassignPrefixes: ({ eniId, prefixes }) => ec2.unassignPrivateIpAddresses({ eniId, prefixes }),
    callCounts: () => ({
      calls: ec2.metrics.calls,
      errors: ec2.metrics.errors,
      throttles: ec2.metrics.throttles,
    }),
  };
}
