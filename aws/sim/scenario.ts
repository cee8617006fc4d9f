/**
 * Scenario files: the world a simulator starts from (VPC, subnets, security groups,
 * instances, extra instance types, faults), in YAML or JSON. Parsed with zod; every error
 * names the file, the line and the field.
 *
 * @module
 */
import { z } from "zod";
import { isMap, LineCounter, parseDocument } from "yaml";
import {
  cidrOverlaps,
  cidrSize,
  cidrWithin,
  parseIpv4,
  parseIpv4Network,
} from "../../base/ipv4.ts";
import { LIMITS_TABLE } from "../limits_table.ts";

const tags = z.record(z.string(), z.string()).default({});
const cidrString = z.string().refine((s) => parseIpv4Network(s) !== undefined, {
  message: "must be an IPv4 CIDR like 10.0.0.0/16 with zero host bits",
});
const bucket = z.object({
  capacity: z.number().positive(),
  refillPerSecond: z.number().nonnegative(),
}).strict();

/** Schema of the `faults` section (every field optional; see FaultConfig). */
export const FaultsSchema = z.object({
  throttle: z.boolean().optional(),
  accountLimits: z.boolean().optional(),
  buckets: z.object({
    nonMutating: bucket.optional(),
    unfilteredNonMutating: bucket.optional(),
    mutating: bucket.optional(),
  }).strict().optional(),
  actionBuckets: z.record(z.string(), bucket).optional(),
  throttleProbability: z.number().min(0).max(1).optional(),
  errorRate: z.number().min(0).max(1).optional(),
  latencyMs: z.record(z.string(), z.number().nonnegative()).optional(),
  consistencyDelayMs: z.number().nonnegative().optional(),
  attachDelayMs: z.number().nonnegative().optional(),
  imdsDelayMs: z.number().nonnegative().optional(),
}).strict();

/** Schema of a whole scenario file. */
export const ScenarioSchema = z.object({
  region: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d+$/, "must be a region like us-east-1"),
  accountId: z.string().regex(/^\d{12}$/, "must be 12 digits").default("123456789012"),
  vpc: z.object({
    id: z.string().regex(/^vpc-[0-9a-z]+$/, "must look like vpc-0123abcd"),
    cidrs: z.array(cidrString).min(1),
    tags,
  }).strict(),
  subnets: z.array(
    z.object({
      id: z.string().regex(/^subnet-[0-9a-z]+$/, "must look like subnet-0123abcd"),
      cidr: cidrString,
      az: z.string().min(1),
      tags,
    }).strict(),
  ).min(1),
  securityGroups: z.array(
    z.object({
      id: z.string().regex(/^sg-[0-9a-z]+$/, "must look like sg-0123abcd"),
      name: z.string().min(1),
      description: z.string().default(""),
      tags,
    }).strict(),
  ).default([]),
  instances: z.array(
    z.object({
      id: z.string().regex(/^i-[0-9a-z]+$/, "must look like i-0123abcd"),
      type: z.string().min(1),
      subnet: z.string(),
      securityGroups: z.array(z.string()).default([]),
      az: z.string().optional(),
      primaryIp: z.string().refine((s) => parseIpv4(s) !== undefined, "must be an IPv4 address")
        .optional(),
      // Addresses the launch gave the primary ENI (a launch template's
      // SecondaryPrivateIpAddressCount or Ipv4PrefixCount): one or the other, as in RunInstances.
      secondaryIps: z.number().int().nonnegative().default(0),
      prefixes: z.number().int().nonnegative().default(0),
      tags,
    }).strict(),
  ).default([]),
  networkInterfaces: z.array(
    z.object({
      id: z.string().regex(/^eni-[0-9a-f]+$/, "must look like eni-0123abcd").optional(),
      subnet: z.string(),
      securityGroups: z.array(z.string()).default([]),
      description: z.string().default(""),
      secondaryIps: z.number().int().nonnegative().default(0),
      prefixes: z.number().int().nonnegative().default(0),
      tags,
      attachment: z.object({
        instance: z.string(),
        deviceIndex: z.number().int().min(1).max(255),
      }).strict().optional(),
    }).strict(),
  ).default([]),
  instanceTypes: z.array(
    z.object({
      type: z.string().regex(/^[a-z0-9-]+\.[a-z0-9-]+$/, "must look like m5.large"),
      maxEnis: z.number().int().positive(),
      ipv4PerEni: z.number().int().positive(),
      hypervisor: z.enum(["nitro", "xen", "unknown"]).default("nitro"),
      bareMetal: z.boolean().default(false),
      /** vCPUs, reported as VCpuInfo.DefaultVCpus (the embedded table has none). */
      vcpus: z.number().int().positive().optional(),
    }).strict(),
  ).default([]),
  faults: FaultsSchema.default({}),
}).strict();

/** A parsed, checked scenario. */
export type Scenario = z.infer<typeof ScenarioSchema>;
/** The scenario as written (before defaults), e.g. for building one in a test. */
export type ScenarioInput = z.input<typeof ScenarioSchema>;

/** One problem in a scenario file. */
export interface ScenarioIssue {
  /** Dotted field path, e.g. `subnets[1].cidr`. */
  field: string;
  line?: number;
  column?: number;
  message: string;
}

/** A scenario that could not be loaded; `message` lists every issue as `file:line:col: field: …`. */
export class ScenarioError extends Error {
  /** Every issue found. */
  readonly issues: ScenarioIssue[];
  /** Where the scenario came from. */
  readonly source: string;
  constructor(source: string, issues: ScenarioIssue[]) {
    super(
      `invalid scenario ${source}:\n` +
        issues.map((i) =>
          `  ${source}${i.line ? `:${i.line}:${i.column ?? 1}` : ""}: ${
            i.field || "(top)"
          }: ${i.message}`
        ).join("\n"),
    );
    this.name = "ScenarioError";
    this.issues = issues;
    this.source = source;
  }
}

type PathKey = string | number;

function fieldName(path: readonly PathKey[]): string {
  let s = "";
  for (const k of path) s += typeof k === "number" ? `[${k}]` : (s ? `.${k}` : k);
  return s;
}

/** Reads and parses a scenario file (YAML or JSON); throws {@linkcode ScenarioError}. */
export function loadScenario(path: string): Scenario {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (e) {
    throw new ScenarioError(path, [{ field: "", message: `cannot read: ${(e as Error).message}` }]);
  }
  return parseScenario(text, path);
}

/** Parses scenario text (YAML or JSON); throws {@linkcode ScenarioError} naming line and field. */
export function parseScenario(text: string, source = "<scenario>"): Scenario {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  if (doc.errors.length > 0) {
    throw new ScenarioError(
      source,
      doc.errors.map((e) => {
        const pos = lc.linePos(e.pos[0]);
        return { field: "", line: pos.line, column: pos.col, message: e.message.split("\n")[0] };
      }),
    );
  }
  const locate = (path: readonly PathKey[]): { line?: number; column?: number } => {
    // Walk up until a node exists (a missing field is reported at its parent).
    for (let n = path.length; n >= 0; n--) {
      const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
      // deno-lint-ignore no-explicit-any
      const range = (node as any)?.range as [number, number, number] | undefined;
      if (range) {
        const pos = lc.linePos(range[0]);
        return { line: pos.line, column: pos.col };
      }
    }
    return {};
  };
  const raw = doc.toJS();
  if (raw === null || typeof raw !== "object" || (doc.contents && !isMap(doc.contents))) {
    throw new ScenarioError(source, [{
      field: "",
      line: 1,
      message: "must be a mapping (object)",
    }]);
  }
  const parsed = ScenarioSchema.safeParse(raw);
  if (!parsed.success) {
    throw new ScenarioError(
      source,
      parsed.error.issues.map((i) => ({
        field: fieldName(i.path as PathKey[]),
        ...locate(i.path as PathKey[]),
        message: i.message,
      })),
    );
  }
  const issues = checkReferences(parsed.data).map((p) => ({
    field: fieldName(p.path),
    ...locate(p.path),
    message: p.message,
  }));
  if (issues.length > 0) throw new ScenarioError(source, issues);
  return parsed.data;
}

/** Validates an in-memory scenario (as a test would build it); throws {@linkcode ScenarioError}. */
export function checkScenario(input: ScenarioInput, source = "<scenario object>"): Scenario {
  const parsed = ScenarioSchema.safeParse(input);
  if (!parsed.success) {
    throw new ScenarioError(
      source,
      parsed.error.issues.map((i) => ({
        field: fieldName(i.path as PathKey[]),
        message: i.message,
      })),
    );
  }
  const issues = checkReferences(parsed.data);
  if (issues.length > 0) {
    throw new ScenarioError(
      source,
      issues.map((p) => ({ field: fieldName(p.path), message: p.message })),
    );
  }
  return parsed.data;
}

/** Cross-field checks zod cannot express: references, containment, uniqueness. */
function checkReferences(s: Scenario): { path: PathKey[]; message: string }[] {
  const out: { path: PathKey[]; message: string }[] = [];
  const vpcCidrs = s.vpc.cidrs.map((c) => parseIpv4Network(c)!);
  const subnetById = new Map<string, Scenario["subnets"][number]>();
  s.subnets.forEach((sn, i) => {
    if (subnetById.has(sn.id)) {
      out.push({ path: ["subnets", i, "id"], message: `duplicate subnet id ${sn.id}` });
    }
    subnetById.set(sn.id, sn);
    const c = parseIpv4Network(sn.cidr)!;
    if (!vpcCidrs.some((v) => cidrWithin(c, v))) {
      out.push({
        path: ["subnets", i, "cidr"],
        message: `${sn.cidr} is not inside the VPC CIDRs ${s.vpc.cidrs.join(", ")}`,
      });
    }
    if (c.prefixLen < 16 || c.prefixLen > 28) {
      out.push({
        path: ["subnets", i, "cidr"],
        message: "a subnet's prefix length must be between /16 and /28 (as in AWS)",
      });
    }
    s.subnets.slice(0, i).forEach((other, j) => {
      if (cidrOverlaps(c, parseIpv4Network(other.cidr)!)) {
        out.push({
          path: ["subnets", i, "cidr"],
          message: `overlaps subnets[${j}] (${other.cidr})`,
        });
      }
    });
  });
  const sgIds = new Set<string>();
  s.securityGroups.forEach((g, i) => {
    if (sgIds.has(g.id)) {
      out.push({
        path: ["securityGroups", i, "id"],
        message: `duplicate security group id ${g.id}`,
      });
    }
    sgIds.add(g.id);
  });
  const extraTypes = new Set(s.instanceTypes.map((t) => t.type));
  const instanceIds = new Set<string>();
  s.instances.forEach((inst, i) => {
    if (instanceIds.has(inst.id)) {
      out.push({ path: ["instances", i, "id"], message: `duplicate instance id ${inst.id}` });
    }
    instanceIds.add(inst.id);
    const sn = subnetById.get(inst.subnet);
    if (!sn) {
      out.push({
        path: ["instances", i, "subnet"],
        message: `unknown subnet ${inst.subnet} (define it under subnets)`,
      });
    } else {
      if (inst.az !== undefined && inst.az !== sn.az) {
        out.push({
          path: ["instances", i, "az"],
          message: `${inst.az} differs from the AZ of ${sn.id} (${sn.az})`,
        });
      }
      if (inst.primaryIp !== undefined) {
        const c = parseIpv4Network(sn.cidr)!;
        const ip = parseIpv4(inst.primaryIp)!;
        if (ip < c.address + 4 || ip >= c.address + cidrSize(c) - 1) {
          out.push({
            path: ["instances", i, "primaryIp"],
            message: `${inst.primaryIp} is not a usable address of ${sn.cidr}`,
          });
        }
      }
    }
    inst.securityGroups.forEach((g, k) => {
      if (!sgIds.has(g)) {
        out.push({
          path: ["instances", i, "securityGroups", k],
          message: `unknown security group ${g}`,
        });
      }
    });
    if (!extraTypes.has(inst.type) && !Object.hasOwn(LIMITS_TABLE, inst.type)) {
      out.push({
        path: ["instances", i, "type"],
        message: `unknown instance type ${inst.type} (add it under instanceTypes)`,
      });
    }
  });
  const primaryIps = new Map<string, number>();
  s.instances.forEach((inst, i) => {
    if (inst.primaryIp === undefined) return;
    const prior = primaryIps.get(inst.primaryIp);
    if (prior !== undefined) {
      out.push({
        path: ["instances", i, "primaryIp"],
        message: `${inst.primaryIp} is already the primary IP of instances[${prior}]`,
      });
    }
    primaryIps.set(inst.primaryIp, i);
  });
  const eniIds = new Set<string>();
  const devices = new Set<string>();
  s.networkInterfaces.forEach((eni, i) => {
    if (eni.id !== undefined) {
      if (eniIds.has(eni.id)) {
        out.push({ path: ["networkInterfaces", i, "id"], message: `duplicate ENI id ${eni.id}` });
      }
      eniIds.add(eni.id);
    }
    const sn = subnetById.get(eni.subnet);
    if (!sn) {
      out.push({
        path: ["networkInterfaces", i, "subnet"],
        message: `unknown subnet ${eni.subnet}`,
      });
    }
    eni.securityGroups.forEach((g, k) => {
      if (!sgIds.has(g)) {
        out.push({
          path: ["networkInterfaces", i, "securityGroups", k],
          message: `unknown security group ${g}`,
        });
      }
    });
    const a = eni.attachment;
    if (!a) return;
    const inst = s.instances.find((x) => x.id === a.instance);
    if (!inst) {
      out.push({
        path: ["networkInterfaces", i, "attachment", "instance"],
        message: `unknown instance ${a.instance} (define it under instances)`,
      });
      return;
    }
    const key = `${a.instance}/${a.deviceIndex}`;
    if (devices.has(key)) {
      out.push({
        path: ["networkInterfaces", i, "attachment", "deviceIndex"],
        message: `device index ${a.deviceIndex} of ${a.instance} is used twice`,
      });
    }
    devices.add(key);
    const instSubnet = subnetById.get(inst.subnet);
    if (sn && instSubnet && sn.az !== instSubnet.az) {
      out.push({
        path: ["networkInterfaces", i, "attachment", "instance"],
        message: `${a.instance} is in ${instSubnet.az} but ${eni.subnet} is in ${sn.az}`,
      });
    }
  });
  return out;
}
