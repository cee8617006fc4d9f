/**
 * The EC2 client vpcni uses: the actions the IPAM daemon needs, over `@aws-sdk/client-ec2`,
 * with client-side token buckets per action, full-jitter retries, a `ClientToken` on
 * CreateNetworkInterface, pagination, counters, and plain typed results.
 *
 * Credentials come from the SDK's default chain (environment, profile, IMDS role, …) unless
 * given. Every failure is an {@linkcode Ec2Error}.
 *
 * This file holds the client itself: its options, the SDK client, and the call path every
 * action goes through. The actions' requests and answers are in `ec2_describe.ts` (the
 * Describe actions) and `ec2_eni.ts` (ENIs, their addresses, tags).
 *
 * @module
 */
import * as sdk from "@aws-sdk/client-ec2";
import {
  type ActionCall,
  CallEngine,
  type Ec2Caller,
  type Ec2Metrics,
  type PagedCall,
  type RetryEvent,
} from "./ec2_call.ts";
import * as describe from "./ec2_describe.ts";
import * as eni from "./ec2_eni.ts";
import type { Ec2Error } from "./ec2_errors.ts";
import {
  type AssignInput,
  bad,
  type CreateNetworkInterfaceInput,
  type DescribeQuery,
  type ModifyNetworkInterfaceInput,
} from "./ec2_input.ts";
import type {
  AssignedAddresses,
  Instance,
  InstanceTypeInfo,
  NetworkInterface,
  SecurityGroup,
  Subnet,
  Tags,
  Vpc,
} from "./ec2_types.ts";
import { resolveRetry, type RetryPolicy } from "./retry.ts";
import { ActionLimiter, type BucketConfig } from "./throttle.ts";

export { Ec2Error, Ec2FilterError } from "./ec2_errors.ts";
export { FILTER_NAMES, type FilteredAction } from "./ec2_filter_names.ts";
export type {
  AssignInput,
  CreateNetworkInterfaceInput,
  DescribeQuery,
  ModifyNetworkInterfaceInput,
} from "./ec2_input.ts";
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
  #caller: SdkCaller;

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
    const pageSize = Math.min(1000, Math.max(5, o.pageSize ?? 1000));
    const consistencyWindowMs = o.consistencyWindowMs ?? 10_000;
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
    const engine = new CallEngine({
      endpoint: this.endpoint,
      limiter: new ActionLimiter(o.buckets),
      retry,
      attemptTimeoutMs,
      onRetry: o.onRetry,
      random: o.random,
    });
    this.metrics = engine.metrics;
    this.#caller = new SdkCaller(this.#sdk, engine, pageSize, consistencyWindowMs);
  }

  /** Releases the SDK's sockets. */
  close(): void {
    this.#sdk.destroy();
  }

  /** DescribeInstanceTypes for the given types (unknown types: EC2's InvalidInstanceType). */
  describeInstanceTypes(types: string[]): Promise<InstanceTypeInfo[]> {
    return describe.describeInstanceTypes(this.#caller, types);
  }

  /** DescribeInstances (instances of every reservation, flattened). */
  describeInstances(q: DescribeQuery = {}): Promise<Instance[]> {
    return describe.describeInstances(this.#caller, q);
  }

  /** DescribeSubnets by ids, VPC, AZ and tags. */
  describeSubnets(q: DescribeQuery & { vpcId?: string; az?: string } = {}): Promise<Subnet[]> {
    return describe.describeSubnets(this.#caller, q);
  }

  /**
   * DescribeNetworkInterfaces by ids, attached instance, subnet, filters and tags. With
   * `ignoreMissing`, ids EC2 does not know are left out instead of failing the call.
   */
  describeNetworkInterfaces(
    q: DescribeQuery & { instanceId?: string; subnetId?: string; ignoreMissing?: boolean } = {},
  ): Promise<NetworkInterface[]> {
    return describe.describeNetworkInterfaces(this.#caller, q);
  }

  /** DescribeVpcs; each VPC with all its associated IPv4 CIDRs. */
  describeVpcs(q: DescribeQuery = {}): Promise<Vpc[]> {
    return describe.describeVpcs(this.#caller, q);
  }

  /** DescribeSecurityGroups by ids, VPC, filters and tags. */
  describeSecurityGroups(q: DescribeQuery & { vpcId?: string } = {}): Promise<SecurityGroup[]> {
    return describe.describeSecurityGroups(this.#caller, q);
  }

  /**
   * CreateNetworkInterface, tagged at creation. The same `ClientToken` goes with every retry,
   * so EC2 returns the ENI of an earlier attempt instead of making a second one.
   */
  createNetworkInterface(i: CreateNetworkInterfaceInput): Promise<NetworkInterface> {
    return eni.createNetworkInterface(this.#caller, i);
  }

  /**
   * AttachNetworkInterface; returns the attachment id. When a retry fails because an earlier
   * attempt already attached the ENI at this index, that attachment is returned.
   */
  attachNetworkInterface(
    i: { eniId: string; instanceId: string; deviceIndex: number; networkCardIndex?: number },
  ): Promise<string> {
    return eni.attachNetworkInterface(this.#caller, i);
  }

  /** DetachNetworkInterface; a retry that finds the attachment gone counts as done. */
  detachNetworkInterface(i: { attachmentId: string; force?: boolean }): Promise<void> {
    return eni.detachNetworkInterface(this.#caller, i);
  }

  /** DeleteNetworkInterface; a retry that finds the ENI gone counts as done. */
  deleteNetworkInterface(eniId: string): Promise<void> {
    return eni.deleteNetworkInterface(this.#caller, eniId);
  }

  /**
   * ModifyNetworkInterfaceAttribute. EC2 takes one attribute per request, so each given
   * attribute is one call. `deleteOnTermination` needs the attachment id; it is looked up
   * when not given.
   */
  modifyNetworkInterfaceAttribute(i: ModifyNetworkInterfaceInput): Promise<void> {
    return eni.modifyNetworkInterfaceAttribute(this.#caller, i);
  }

  /** AssignPrivateIpAddresses: `count` IPs, the given `ips`, or `prefixCount` /28 prefixes. */
  assignPrivateIpAddresses(i: AssignInput): Promise<AssignedAddresses> {
    return eni.assignPrivateIpAddresses(this.#caller, i);
  }

  /** UnassignPrivateIpAddresses for IPs and/or prefixes (one call each). */
  unassignPrivateIpAddresses(
    i: { eniId: string; ips?: string[]; prefixes?: string[] },
  ): Promise<void> {
    return eni.unassignPrivateIpAddresses(this.#caller, i);
  }

  /** CreateTags on the given resources. */
  createTags(ids: string[], tags: Tags): Promise<void> {
    return eni.createTags(this.#caller, ids, tags);
  }
}

/**
 * The call path of every action: each request goes through the {@linkcode CallEngine}
 * (buckets, retries, counters) as one SDK send per attempt. It also keeps the ENIs this client
 * created, because EC2 may not know them everywhere yet.
 *
 * Every request counts as `filtered`: each Describe sent here carries ids, filters or a page
 * size, and for the other (mutating) actions EC2's bucket does not depend on it.
 */
class SdkCaller implements Ec2Caller {
  readonly pageSize: number;
  #sdk: sdk.EC2Client;
  #engine: CallEngine;
  #consistencyWindowMs: number;
  /** ENIs this client created, with when. */
  #created = new Map<string, number>();

  constructor(
    client: sdk.EC2Client,
    engine: CallEngine,
    pageSize: number,
    consistencyWindowMs: number,
  ) {
    this.#sdk = client;
    this.#engine = engine;
    this.pageSize = pageSize;
    this.#consistencyWindowMs = consistencyWindowMs;
  }

  call<O, T = O>(c: ActionCall<O, T>): Promise<T> {
    const read = c.read ?? ((o: O) => o as unknown as T);
    return this.#engine.run({
      action: c.action,
      filtered: true,
      send: async (signal) => read(await this.#send<O>(c.command(), signal)),
      recover: c.recover,
      retryIf: this.#justCreated(c.eniIds),
    });
  }

  async pages<O extends { NextToken?: string }, R>(p: PagedCall<O, R>): Promise<R[]> {
    const retryIf = this.#justCreated(p.eniIds);
    const out: R[] = [];
    let token: string | undefined;
    for (let page = 0; page < 10_000; page++) {
      const res = await this.#engine.run({
        action: p.action,
        filtered: true,
        send: (signal) => this.#send<O>(p.command(token), signal),
        retryIf,
      });
      out.push(...p.items(res));
      token = res.NextToken || undefined;
      if (!token) return out;
    }
    throw bad(p.action, "pagination did not end after 10000 pages");
  }

  noteCreated(eniId: string): void {
    this.#created.set(eniId, performance.now());
  }

  forgetCreated(eniId: string): void {
    this.#created.delete(eniId);
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
  #send<O>(command: any, signal: AbortSignal): Promise<O> {
    return this.#sdk.send(command, { abortSignal: signal }) as Promise<O>;
  }
}
