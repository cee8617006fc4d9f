/**
 * The EC2 client vpcni uses: the actions the IPAM daemon needs, over `@aws-sdk/client-ec2`,
 * with client-side token buckets per action, full-jitter retries, a `ClientToken` on
 * CreateNetworkInterface, pagination, counters, and plain typed results.
 *
 * Credentials come from the SDK's default chain (environment, profile, IMDS role, …) unless
 * given. Every failure is an {@linkcode Ec2Error}.
 *
 * @module
 */
import * as sdk from "@aws-sdk/client-ec2";
import { CallEngine, type Ec2Metrics, type RetryEvent } from "./ec2_call.ts";
import type { Ec2Error } from "./ec2_errors.ts";
import {
  type AssignedAddresses,
  type Instance,
  type InstanceTypeInfo,
  type NetworkInterface,
  type SecurityGroup,
  type Subnet,
  tagList,
  type Tags,
  toInstance,
  toInstanceTypeInfo,
  toNetworkInterface,
  toSecurityGroup,
  toSubnet,
  toVpc,
  type Vpc,
} from "./ec2_types.ts";
import {
  type AssignInput,
  bad,
  checkId,
  type CreateNetworkInterfaceInput,
  type DescribeQuery,
  isIpv4,
  toFilters,
} from "./ec2_input.ts";
import { resolveRetry, type RetryPolicy } from "./retry.ts";
import { ActionLimiter, type BucketConfig } from "./throttle.ts";

export { Ec2Error } from "./ec2_errors.ts";
export type { AssignInput, CreateNetworkInterfaceInput, DescribeQuery } from "./ec2_input.ts";
export { metricsSnapshot } from "./ec2_call.ts";
export type { Ec2Metrics, RetryEvent } from "./ec2_call.ts";
export type * from "./ec2_types.ts";
export { type BucketConfig, type BucketSpec, DEFAULT_BUCKETS } from "./throttle.ts";
export { DEFAULT_RETRY, type RetryPolicy } from "./retry.ts";

/** Options of {@linkcode Ec2Client}. */
export interface Ec2ClientOptions {
  region: string;
  /** Endpoint override, e.g. `http://127.0.0.1:5000` for the simulator or moto. */
  endpoint?: string;
  /** Client-side bucket overrides (defaults: EC2's published request-rate limits). */
  buckets?: Partial<BucketConfig>;
  /** Attempts per call in total (default 6). */
  maxAttempts?: number;
  /** Backoff and deadline overrides. */
  retry?: Partial<RetryPolicy>;
  /** Hard limit of one HTTP attempt in ms (default 10 000). */
  attemptTimeoutMs?: number;
  /** TCP connect limit in ms (default 3 000). */
  connectTimeoutMs?: number;
  /** Static credentials; otherwise the SDK's default chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Told before each retry. */
  onRetry?: (e: RetryEvent) => void;
  /** Page size of Describe calls (5…1000; DescribeInstanceTypes is capped at 100). */
  pageSize?: number;
  /**
   * For this long after this client created an ENI, `InvalidNetworkInterfaceID.NotFound` on
   * it is taken for EC2's eventual consistency and retried (default 10 000 ms).
   */
  consistencyWindowMs?: number;
  /** Source of the backoff jitter, uniform in [0, 1) (default `Math.random`; tests pin it). */
  random?: () => number;
}

/** One EC2 client for the daemon. */
export class Ec2Client {
  /** Counters of every call (see {@linkcode Ec2Metrics}). */
  readonly metrics: Ec2Metrics;
  /** The endpoint in use (the override, or the regional default). */
  readonly endpoint: string;
  readonly region: string;
  #sdk: sdk.EC2Client;
  #engine: CallEngine;
  #pageSize: number;
  #consistencyWindowMs: number;
  /** ENIs this client created, with when: EC2 may not know them everywhere yet. */
  #created = new Map<string, number>();

  /** Creates the client; bad options throw at once with the option's name. */
  constructor(o: Ec2ClientOptions) {
    if (!o || typeof o.region !== "string" || !/^[a-z]{2}(-[a-z]+)+-\d+$/.test(o.region)) {
      throw new TypeError(`Ec2Client: region must look like 'us-east-1', got ${o?.region}`);
    }
    if (o.endpoint !== undefined) {
      let u: URL | undefined;
      try {
        u = new URL(o.endpoint);
      } catch { /* reported below */ }
      if (!u || (u.protocol !== "http:" && u.protocol !== "https:")) {
        throw new TypeError(`Ec2Client: endpoint must be an http(s) URL, got '${o.endpoint}'`);
      }
    }
    this.region = o.region;
    this.endpoint = o.endpoint ?? `https://ec2.${o.region}.amazonaws.com`;
    this.#pageSize = Math.min(1000, Math.max(5, o.pageSize ?? 1000));
    this.#consistencyWindowMs = o.consistencyWindowMs ?? 10_000;
    const retry = resolveRetry({
      ...o.retry,
      ...(o.maxAttempts ? { maxAttempts: o.maxAttempts } : {}),
    });
    const attemptTimeoutMs = o.attemptTimeoutMs ?? 10_000;
    this.#sdk = new sdk.EC2Client({
      region: o.region,
      endpoint: o.endpoint,
      credentials: o.credentials,
      maxAttempts: 1, // retries happen in CallEngine, where each one is counted
      requestHandler: {
        connectionTimeout: o.connectTimeoutMs ?? 3_000,
        requestTimeout: attemptTimeoutMs,
      },
    });
    this.#engine = new CallEngine({
      endpoint: this.endpoint,
      limiter: new ActionLimiter(o.buckets),
      retry,
      attemptTimeoutMs,
      onRetry: o.onRetry,
      random: o.random,
    });
    this.metrics = this.#engine.metrics;
  }

  /** Releases the SDK's sockets. */
  close(): void {
    this.#sdk.destroy();
  }

  /** A retry predicate: NotFound on one of `eniIds` that this client created a moment ago. */
  #justCreated(eniIds: string[] | undefined): ((e: Ec2Error) => boolean) | undefined {
    if (!eniIds?.length || this.#created.size === 0) return undefined;
    return (e) => {
      if (e.code !== "InvalidNetworkInterfaceID.NotFound") return false;
      const now = performance.now();
      for (const [id, at] of this.#created) {
        if (now - at > this.#consistencyWindowMs) this.#created.delete(id);
      }
      return eniIds.some((id) => this.#created.has(id));
    };
  }

  // deno-lint-ignore no-explicit-any
  #send<T>(command: any, signal: AbortSignal): Promise<T> {
    return this.#sdk.send(command, { abortSignal: signal }) as Promise<T>;
  }

  async #paginate<O extends { NextToken?: string }, R>(
    action: string,
    filtered: boolean,
    command: (token: string | undefined) => unknown,
    items: (o: O) => R[],
    retryIf?: (e: Ec2Error) => boolean,
  ): Promise<R[]> {
    const out: R[] = [];
    let token: string | undefined;
    for (let page = 0; page < 10_000; page++) {
      const res = await this.#engine.run({
        action,
        filtered,
        send: (signal) => this.#send<O>(command(token), signal),
        retryIf,
      });
      out.push(...items(res));
      token = res.NextToken || undefined;
      if (!token) return out;
    }
    throw bad(action, "pagination did not end after 10000 pages");
  }

  /** DescribeInstanceTypes for the given types (unknown types: EC2's InvalidInstanceType). */
  describeInstanceTypes(types: string[]): Promise<InstanceTypeInfo[]> {
    const A = "DescribeInstanceTypes";
    if (
      !Array.isArray(types) ||
      types.some((t) => typeof t !== "string" || !/^[a-z0-9-]+\.[a-z0-9-]+$/.test(t))
    ) {
      return Promise.reject(
        bad(A, `instance types must look like 'm5.large', got ${JSON.stringify(types)}`),
      );
    }
    const paged = types.length === 0;
    return this.#paginate<sdk.DescribeInstanceTypesResult, InstanceTypeInfo>(
      A,
      true,
      (NextToken) =>
        new sdk.DescribeInstanceTypesCommand({
          InstanceTypes: paged ? undefined : types as sdk._InstanceType[],
          MaxResults: paged ? Math.min(100, this.#pageSize) : undefined,
          NextToken,
        }),
      (o) => (o.InstanceTypes ?? []).map(toInstanceTypeInfo),
    );
  }

  /** DescribeInstances (instances of every reservation, flattened). */
  describeInstances(q: DescribeQuery = {}): Promise<Instance[]> {
    const A = "DescribeInstances";
    q.ids?.forEach((id) => checkId(A, "instance id", id));
    const Filters = toFilters(q);
    const byId = !!q.ids?.length;
    return this.#paginate<sdk.DescribeInstancesResult, Instance>(
      A,
      true,
      (NextToken) =>
        new sdk.DescribeInstancesCommand({
          InstanceIds: q.ids,
          Filters,
          MaxResults: byId ? undefined : this.#pageSize,
          NextToken,
        }),
      (o) => (o.Reservations ?? []).flatMap((r) => (r.Instances ?? []).map(toInstance)),
    );
  }

  /** DescribeSubnets by ids, VPC, AZ and tags. */
  describeSubnets(q: DescribeQuery & { vpcId?: string; az?: string } = {}): Promise<Subnet[]> {
    const A = "DescribeSubnets";
    q.ids?.forEach((id) => checkId(A, "subnet id", id));
    const Filters = toFilters(q, {
      "vpc-id": q.vpcId ? [q.vpcId] : undefined,
      "availability-zone": q.az ? [q.az] : undefined,
    });
    const byId = !!q.ids?.length;
    return this.#paginate<sdk.DescribeSubnetsResult, Subnet>(
      A,
      true,
      (NextToken) =>
        new sdk.DescribeSubnetsCommand({
          SubnetIds: q.ids,
          Filters,
          MaxResults: byId ? undefined : this.#pageSize,
          NextToken,
        }),
      (o) => (o.Subnets ?? []).map(toSubnet),
    );
  }

  /**
   * DescribeNetworkInterfaces by ids, attached instance, subnet, filters and tags. With
   * `ignoreMissing`, ids EC2 does not know are left out instead of failing the call.
   */
  describeNetworkInterfaces(
    q: DescribeQuery & { instanceId?: string; subnetId?: string; ignoreMissing?: boolean } = {},
  ): Promise<NetworkInterface[]> {
    const A = "DescribeNetworkInterfaces";
    q.ids?.forEach((id) => checkId(A, "ENI id", id));
    // By id, one unknown id fails the whole call; as a filter, unknown ids are just absent.
    const asFilter = !!q.ignoreMissing && !!q.ids?.length;
    const Filters = toFilters(q, {
      "attachment.instance-id": q.instanceId ? [q.instanceId] : undefined,
      "subnet-id": q.subnetId ? [q.subnetId] : undefined,
      "network-interface-id": asFilter ? q.ids : undefined,
    });
    const byId = !!q.ids?.length && !asFilter;
    return this.#paginate<sdk.DescribeNetworkInterfacesResult, NetworkInterface>(
      A,
      true,
      (NextToken) =>
        new sdk.DescribeNetworkInterfacesCommand({
          NetworkInterfaceIds: asFilter ? undefined : q.ids,
          Filters,
          MaxResults: byId ? undefined : this.#pageSize,
          NextToken,
        }),
      (o) => (o.NetworkInterfaces ?? []).map(toNetworkInterface),
      asFilter ? undefined : this.#justCreated(q.ids),
    );
  }

  /** DescribeVpcs; each VPC with all its associated IPv4 CIDRs. */
  describeVpcs(q: DescribeQuery = {}): Promise<Vpc[]> {
    const A = "DescribeVpcs";
    q.ids?.forEach((id) => checkId(A, "VPC id", id));
    const Filters = toFilters(q);
    const byId = !!q.ids?.length;
    return this.#paginate<sdk.DescribeVpcsResult, Vpc>(
      A,
      true,
      (NextToken) =>
        new sdk.DescribeVpcsCommand({
          VpcIds: q.ids,
          Filters,
          MaxResults: byId ? undefined : this.#pageSize,
          NextToken,
        }),
      (o) => (o.Vpcs ?? []).map(toVpc),
    );
  }

  /** DescribeSecurityGroups by ids, VPC, filters and tags. */
  describeSecurityGroups(q: DescribeQuery & { vpcId?: string } = {}): Promise<SecurityGroup[]> {
    const A = "DescribeSecurityGroups";
    q.ids?.forEach((id) => checkId(A, "security group id", id));
    const Filters = toFilters(q, { "vpc-id": q.vpcId ? [q.vpcId] : undefined });
    const byId = !!q.ids?.length;
    return this.#paginate<sdk.DescribeSecurityGroupsResult, SecurityGroup>(
      A,
      true,
      (NextToken) =>
        new sdk.DescribeSecurityGroupsCommand({
          GroupIds: q.ids,
          Filters,
          MaxResults: byId ? undefined : this.#pageSize,
          NextToken,
        }),
      (o) => (o.SecurityGroups ?? []).map(toSecurityGroup),
    );
  }

  /**
   * CreateNetworkInterface, tagged at creation. The same `ClientToken` goes with every retry,
   * so EC2 returns the ENI of an earlier attempt instead of making a second one.
   */
  async createNetworkInterface(i: CreateNetworkInterfaceInput): Promise<NetworkInterface> {
    const A = "CreateNetworkInterface";
    checkId(A, "subnetId", i?.subnetId);
    if (!Array.isArray(i.securityGroupIds)) throw bad(A, "securityGroupIds must be an array");
    i.securityGroupIds.forEach((g) => checkId(A, "security group id", g));
    for (const k of ["secondaryIpCount", "prefixCount"] as const) {
      const v = i[k];
      if (v !== undefined && (!Number.isInteger(v) || v < 0)) throw bad(A, `${k} must be >= 0`);
    }
    if (i.clientToken !== undefined && !/^[\x21-\x7e]{1,64}$/.test(i.clientToken)) {
      throw bad(A, "clientToken must be 1-64 printable ASCII characters");
    }
    const ClientToken = i.clientToken ?? crypto.randomUUID();
    const input: sdk.CreateNetworkInterfaceRequest = {
      SubnetId: i.subnetId,
      Groups: i.securityGroupIds.length ? i.securityGroupIds : undefined,
      Description: i.description,
      ClientToken,
      SecondaryPrivateIpAddressCount: i.secondaryIpCount || undefined,
      Ipv4PrefixCount: i.prefixCount || undefined,
      TagSpecifications: i.tags && Object.keys(i.tags).length
        ? [{ ResourceType: "network-interface", Tags: tagList(i.tags) }]
        : undefined,
    };
    const res = await this.#engine.run({
      action: A,
      filtered: true,
      send: (signal) =>
        this.#send<sdk.CreateNetworkInterfaceResult>(
          new sdk.CreateNetworkInterfaceCommand(input),
          signal,
        ),
    });
    if (!res.NetworkInterface) throw bad(A, "EC2 answered without a NetworkInterface");
    const eni = toNetworkInterface(res.NetworkInterface);
    this.#created.set(eni.eniId, performance.now());
    return eni;
  }

  /**
   * AttachNetworkInterface; returns the attachment id. When a retry fails because an earlier
   * attempt already attached the ENI at this index, that attachment is returned.
   */
  attachNetworkInterface(
    i: { eniId: string; instanceId: string; deviceIndex: number; networkCardIndex?: number },
  ): Promise<string> {
    const A = "AttachNetworkInterface";
    checkId(A, "eniId", i?.eniId);
    checkId(A, "instanceId", i.instanceId);
    if (!Number.isInteger(i.deviceIndex) || i.deviceIndex < 0) {
      return Promise.reject(bad(A, `deviceIndex must be an integer >= 0, got ${i.deviceIndex}`));
    }
    return this.#engine.run({
      action: A,
      filtered: true,
      retryIf: this.#justCreated([i.eniId]),
      send: async (signal) => {
        const r = await this.#send<sdk.AttachNetworkInterfaceResult>(
          new sdk.AttachNetworkInterfaceCommand({
            NetworkInterfaceId: i.eniId,
            InstanceId: i.instanceId,
            DeviceIndex: i.deviceIndex,
            NetworkCardIndex: i.networkCardIndex,
          }),
          signal,
        );
        if (!r.AttachmentId) throw bad(A, "EC2 answered without an AttachmentId");
        return r.AttachmentId;
      },
      recover: async () => {
        const [eni] = await this.describeNetworkInterfaces({ ids: [i.eniId] }).catch(() => []);
        const a = eni?.attachment;
        return a && a.instanceId === i.instanceId && a.deviceIndex === i.deviceIndex
          ? a.attachmentId
          : undefined;
      },
    });
  }

  /** DetachNetworkInterface; a retry that finds the attachment gone counts as done. */
  async detachNetworkInterface(i: { attachmentId: string; force?: boolean }): Promise<void> {
    const A = "DetachNetworkInterface";
    checkId(A, "attachmentId", i?.attachmentId);
    await this.#engine.run({
      action: A,
      filtered: true,
      send: (signal) =>
        this.#send(
          new sdk.DetachNetworkInterfaceCommand({ AttachmentId: i.attachmentId, Force: i.force }),
          signal,
        ),
      recover: (e) => Promise.resolve(e.code === "InvalidAttachmentID.NotFound" ? true : undefined),
    });
  }

  /** DeleteNetworkInterface; a retry that finds the ENI gone counts as done. */
  async deleteNetworkInterface(eniId: string): Promise<void> {
    const A = "DeleteNetworkInterface";
    checkId(A, "eniId", eniId);
    await this.#engine.run({
      action: A,
      filtered: true,
      retryIf: this.#justCreated([eniId]),
      send: (signal) =>
        this.#send(new sdk.DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId }), signal),
      recover: (e) =>
        Promise.resolve(e.code === "InvalidNetworkInterfaceID.NotFound" ? true : undefined),
    });
    this.#created.delete(eniId);
  }

  /**
   * ModifyNetworkInterfaceAttribute. EC2 takes one attribute per request, so each given
   * attribute is one call. `deleteOnTermination` needs the attachment id; it is looked up
   * when not given.
   */
  async modifyNetworkInterfaceAttribute(i: {
    eniId: string;
    deleteOnTermination?: boolean;
    attachmentId?: string;
    groups?: string[];
    sourceDestCheck?: boolean;
    description?: string;
  }): Promise<void> {
    const A = "ModifyNetworkInterfaceAttribute";
    checkId(A, "eniId", i?.eniId);
    i.groups?.forEach((g) => checkId(A, "security group id", g));
    const requests: sdk.ModifyNetworkInterfaceAttributeRequest[] = [];
    const base = { NetworkInterfaceId: i.eniId };
    if (i.groups) requests.push({ ...base, Groups: i.groups });
    if (i.sourceDestCheck !== undefined) {
      requests.push({ ...base, SourceDestCheck: { Value: i.sourceDestCheck } });
    }
    if (i.description !== undefined) {
      requests.push({ ...base, Description: { Value: i.description } });
    }
    if (i.deleteOnTermination !== undefined) {
      let attachmentId = i.attachmentId;
      if (!attachmentId) {
        const [eni] = await this.describeNetworkInterfaces({ ids: [i.eniId] });
        attachmentId = eni?.attachment?.attachmentId;
        if (!attachmentId) {
          throw bad(A, `${i.eniId} is not attached: deleteOnTermination needs an attachment`);
        }
      }
      requests.push({
        ...base,
        Attachment: { AttachmentId: attachmentId, DeleteOnTermination: i.deleteOnTermination },
      });
    }
    if (requests.length === 0) throw bad(A, "nothing to modify: give at least one attribute");
    for (const input of requests) {
      await this.#engine.run({
        action: A,
        filtered: true,
        retryIf: this.#justCreated([i.eniId]),
        send: (signal) => this.#send(new sdk.ModifyNetworkInterfaceAttributeCommand(input), signal),
      });
    }
  }

  /** AssignPrivateIpAddresses: `count` IPs, the given `ips`, or `prefixCount` /28 prefixes. */
  async assignPrivateIpAddresses(i: AssignInput): Promise<AssignedAddresses> {
    const A = "AssignPrivateIpAddresses";
    checkId(A, "eniId", i?.eniId);
    const given = [i.count !== undefined, i.ips !== undefined, i.prefixCount !== undefined]
      .filter(Boolean).length;
    if (given !== 1) throw bad(A, "give exactly one of count, ips, prefixCount");
    for (const k of ["count", "prefixCount"] as const) {
      const v = i[k];
      if (v !== undefined && (!Number.isInteger(v) || v < 1)) {
        throw bad(A, `${k} must be an integer >= 1, got ${v}`);
      }
    }
    if (i.ips && (i.ips.length === 0 || i.ips.some((ip) => !isIpv4(ip)))) {
      throw bad(A, `ips must be IPv4 addresses, got ${JSON.stringify(i.ips)}`);
    }
    const res = await this.#engine.run({
      action: A,
      filtered: true,
      retryIf: this.#justCreated([i.eniId]),
      send: (signal) =>
        this.#send<sdk.AssignPrivateIpAddressesResult>(
          new sdk.AssignPrivateIpAddressesCommand({
            NetworkInterfaceId: i.eniId,
            SecondaryPrivateIpAddressCount: i.count,
            PrivateIpAddresses: i.ips,
            Ipv4PrefixCount: i.prefixCount,
            AllowReassignment: i.allowReassignment,
          }),
          signal,
        ),
    });
    return {
      ips: (res.AssignedPrivateIpAddresses ?? []).flatMap((a) =>
        a.PrivateIpAddress ? [a.PrivateIpAddress] : []
      ),
      prefixes: (res.AssignedIpv4Prefixes ?? []).flatMap((p) => p.Ipv4Prefix ? [p.Ipv4Prefix] : []),
    };
  }

  /** UnassignPrivateIpAddresses for IPs and/or prefixes (one call each). */
  async unassignPrivateIpAddresses(
    i: { eniId: string; ips?: string[]; prefixes?: string[] },
  ): Promise<void> {
    const A = "UnassignPrivateIpAddresses";
    checkId(A, "eniId", i?.eniId);
    if (!i.ips?.length && !i.prefixes?.length) throw bad(A, "give ips or prefixes to unassign");
    if (i.ips?.some((ip) => !isIpv4(ip))) {
      throw bad(A, `ips must be IPv4 addresses, got ${JSON.stringify(i.ips)}`);
    }
    if (i.prefixes?.some((p) => !/^\d+\.\d+\.\d+\.\d+\/28$/.test(p) || !isIpv4(p.slice(0, -3)))) {
      throw bad(A, `prefixes must be IPv4 /28 prefixes, got ${JSON.stringify(i.prefixes)}`);
    }
    const inputs: sdk.UnassignPrivateIpAddressesRequest[] = [];
    if (i.ips?.length) inputs.push({ NetworkInterfaceId: i.eniId, PrivateIpAddresses: i.ips });
    if (i.prefixes?.length) inputs.push({ NetworkInterfaceId: i.eniId, Ipv4Prefixes: i.prefixes });
    for (const input of inputs) {
      await this.#engine.run({
        action: A,
        filtered: true,
        retryIf: this.#justCreated([i.eniId]),
        send: (signal) => this.#send(new sdk.UnassignPrivateIpAddressesCommand(input), signal),
      });
    }
  }

  /** CreateTags on the given resources. */
  async createTags(ids: string[], tags: Tags): Promise<void> {
    const A = "CreateTags";
    if (!Array.isArray(ids) || ids.length === 0) throw bad(A, "give at least one resource id");
    ids.forEach((id) => checkId(A, "resource id", id));
    if (!tags || Object.keys(tags).length === 0) throw bad(A, "give at least one tag");
    await this.#engine.run({
      action: A,
      filtered: true,
      retryIf: this.#justCreated(ids),
      send: (signal) =>
        this.#send(new sdk.CreateTagsCommand({ Resources: ids, Tags: tagList(tags) }), signal),
    });
  }
}
