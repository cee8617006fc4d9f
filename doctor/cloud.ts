/**
 * What doctor asks EC2: permissions (DryRun calls, which change nothing), the subnets the
 * pools can use, ENIs that leaked, and the clock offset against the endpoint. One attempt
 * per call and short limits: an on-call engineer waits for this.
 *
 * @module
 */
import * as sdk from "@aws-sdk/client-ec2";
import { Ec2Client, type NetworkInterface, type Subnet } from "../aws/ec2.ts";
import type { NodeMetadata } from "../aws/imds.ts";
import { TAG_CLUSTER, TAG_CREATED, TAG_INSTANCE } from "../base/eni_tags.ts";
import type { ConfigView, DoctorOptions } from "./facts.ts";

/** Where EC2 is, from flags, then the daemon config, then IMDS. */
export interface Ec2Target {
  region: string;
  endpoint?: string;
}

/** Picks the EC2 region and endpoint, or explains why none can be had. */
export function ec2Target(
  o: DoctorOptions,
  cfg: ConfigView,
  md: NodeMetadata | undefined,
): Ec2Target | string {
  const region = o.region ?? cfg.region ?? md?.region ?? Deno.env.get("AWS_REGION");
  if (!region) return "no region: IMDS is unreachable and neither --region nor AWS_REGION is set";
  const endpoint = o.ec2Endpoint ?? cfg.ec2Endpoint ?? Deno.env.get("VPCNI_EC2_ENDPOINT");
  return endpoint ? { region, endpoint } : { region };
}

/** A client with doctor's limits: one attempt, short timeouts. */
export function doctorEc2Client(t: Ec2Target, timeoutMs: number): Ec2Client {
  return new Ec2Client({
    region: t.region,
    endpoint: t.endpoint,
    maxAttempts: 1,
    attemptTimeoutMs: timeoutMs,
    connectTimeoutMs: Math.min(timeoutMs, 3000),
  });
}

/** The outcome of one DryRun probe. */
export interface PermissionProbe {
  action: string;
  /** allowed: DryRunOperation; denied: UnauthorizedOperation; unknown: anything else. */
  result: "allowed" | "denied" | "unknown";
  detail: string;
}

/**
 * Tries each action the daemon needs that EC2 can dry-run with `DryRun=true` (EC2 has no
 * DryRun for Assign/UnassignPrivateIpAddresses; Attach/Detach/Delete need a spare ENI). EC2 answers DryRunOperation when
 * the caller may do it and UnauthorizedOperation when not; nothing is created.
 */
export async function probePermissions(
  t: Ec2Target,
  md: NodeMetadata,
  timeoutMs: number,
): Promise<PermissionProbe[]> {
  const client = new sdk.EC2Client({
    region: t.region,
    endpoint: t.endpoint,
    maxAttempts: 1,
    requestHandler: { connectionTimeout: Math.min(timeoutMs, 3000), requestTimeout: timeoutMs },
  });
  const primary = md.enis.find((e) => e.deviceIndex === 0);
  const probes: [string, () => Promise<unknown>][] = [
    [
      "DescribeNetworkInterfaces",
      () => client.send(new sdk.DescribeNetworkInterfacesCommand({ DryRun: true })),
    ],
    ["DescribeSubnets", () => client.send(new sdk.DescribeSubnetsCommand({ DryRun: true }))],
    [
      "DescribeSecurityGroups",
      () => client.send(new sdk.DescribeSecurityGroupsCommand({ DryRun: true })),
    ],
    ["DescribeInstanceTypes", () =>
      client.send(
        new sdk.DescribeInstanceTypesCommand({
          DryRun: true,
          InstanceTypes: [md.instanceType as sdk._InstanceType],
        }),
      )],
  ];
  if (primary) {
    probes.push(
      ["CreateNetworkInterface", () =>
        client.send(
          new sdk.CreateNetworkInterfaceCommand({
            DryRun: true,
            SubnetId: primary.subnetId,
            Groups: primary.securityGroupIds,
          }),
        )],
      ["CreateTags", () =>
        client.send(
          new sdk.CreateTagsCommand({
            DryRun: true,
            Resources: [primary.eniId],
            Tags: [{ Key: "vpcni.io/doctor", Value: "dry-run" }],
          }),
        )],
    );
  }
  const out: PermissionProbe[] = [];
  try {
    for (const [action, call] of probes) {
      try {
        await call();
        out.push({ action, result: "unknown", detail: "succeeded although DryRun was set" });
      } catch (e) {
        const code = (e as { name?: string; Code?: string }).Code ?? (e as Error).name;
        if (code === "DryRunOperation") out.push({ action, result: "allowed", detail: "allowed" });
        else if (
          code === "UnauthorizedOperation" || code === "AccessDenied" || code === "AuthFailure"
        ) {
          out.push({ action, result: "denied", detail: `${code}: ${(e as Error).message}` });
        } else out.push({ action, result: "unknown", detail: `${code}: ${(e as Error).message}` });
      }
    }
  } finally {
    client.destroy();
  }
  return out;
}

/** Subnets of the node's VPC in its AZ, as EC2 describes them. */
export async function nodeSubnets(ec2: Ec2Client, md: NodeMetadata): Promise<Subnet[]> {
  const primary = md.enis.find((e) => e.deviceIndex === 0);
  const all = await ec2.describeSubnets({ az: md.az });
  // Keep the node's VPC: the subnets of the VPC that holds the primary ENI's subnet.
  const vpc = all.find((s) => s.subnetId === primary?.subnetId)?.vpcId;
  return vpc ? all.filter((s) => s.vpcId === vpc) : all;
}

/** An ENI of ours that is not attached anywhere. */
export interface LeakedEni {
  eniId: string;
  subnetId: string;
  /** Seconds since the created-at tag, when present. */
  ageSeconds?: number;
  instanceId?: string;
}

/** ENIs tagged for this cluster that sit detached ("available"). */
export async function detachedEnis(ec2: Ec2Client, clusterName: string): Promise<LeakedEni[]> {
  const enis: NetworkInterface[] = await ec2.describeNetworkInterfaces({
    tags: { [TAG_CLUSTER]: clusterName },
    filters: { status: ["available"] },
  });
  return enis.filter((e) => e.status === "available" && !e.attachment).map((e) => {
    const created = Date.parse(e.tags[TAG_CREATED] ?? "");
    const out: LeakedEni = { eniId: e.eniId, subnetId: e.subnetId };
    if (Number.isFinite(created)) out.ageSeconds = Math.round((Date.now() - created) / 1000);
    if (e.tags[TAG_INSTANCE]) out.instanceId = e.tags[TAG_INSTANCE];
    return out;
  });
}

/** ENIs EC2 shows attached to the instance (for comparing with the daemon's view). */
export async function attachedEnis(
  ec2: Ec2Client,
  instanceId: string,
): Promise<NetworkInterface[]> {
  return await ec2.describeNetworkInterfaces({ instanceId });
}

/**
 * Seconds the local clock is ahead of the endpoint's (negative: behind), from the `Date`
 * header of a plain request; SigV4 refuses requests more than 5 minutes off.
 */
export async function clockOffsetSeconds(
  t: Ec2Target,
  timeoutMs: number,
): Promise<number | undefined> {
  const url = t.endpoint ?? `https://ec2.${t.region}.amazonaws.com/`;
  try {
    const before = Date.now();
    const r = await fetch(url, { method: "GET", signal: AbortSignal.timeout(timeoutMs) });
    const after = Date.now();
    await r.body?.cancel();
    const date = r.headers.get("date");
    if (!date) return undefined;
    // The header has one-second resolution; compare with the midpoint of the request.
    return Math.round(((before + after) / 2 - Date.parse(date)) / 1000);
  } catch {
    return undefined;
  }
}
