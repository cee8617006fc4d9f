/**
 * `doctor limits` and `doctor maxpods`: what an instance type allows, and the max-pods value
 * kubelet should be given, from the embedded limits table (aws/limits.ts).
 *
 * @module
 */
import {
  embeddedInstanceTypes,
  embeddedLimits,
  type InstanceLimits,
  maxPods,
  type MaxPodsOptions,
} from "../aws/limits.ts";

/** Flags of `doctor maxpods`, as commander hands them over. */
export interface MaxPodsFlags {
  instanceType?: string;
  prefixDelegation?: boolean;
  excludePrimaryEni?: boolean;
  maxEnis?: string;
  cap?: boolean;
  vcpus?: string;
}

/** A bad flag: the message names it. */
export class LimitsFlagError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "LimitsFlagError";
  }
}

/** Looks up an instance type or fails naming `--instance-type`. */
export function limitsFor(type: string | undefined): InstanceLimits {
  if (type === undefined || type === "") {
    throw new LimitsFlagError("--instance-type is required (e.g. --instance-type m5.xlarge)");
  }
  const l = embeddedLimits(type);
  if (!l) {
    throw new LimitsFlagError(
      `--instance-type: unknown instance type "${type}" (not in the embedded limits table); ` +
        instanceTypeHint(type),
    );
  }
  return l;
}

/** The fix for an unknown instance type: the right case, or the family's known sizes. */
export function instanceTypeHint(type: string): string {
  const known = embeddedInstanceTypes();
  const lower = type.trim().toLowerCase();
  if (lower !== type && known.includes(lower)) return `did you mean ${lower}?`;
  const family = lower.split(".")[0];
  const sizes = known.filter((t) => t.split(".")[0] === family)
    .sort((a, b) => sizeRank(a) - sizeRank(b) || a.localeCompare(b));
  if (sizes.length > 0) {
    const shown = sizes.slice(0, 10).join(", ");
    return `${family} comes in ${shown}${sizes.length > 10 ? `, … (${sizes.length} sizes)` : ""}`;
  }
  return "check the spelling, e.g. m5.xlarge";
}

const SMALL_SIZES = ["nano", "micro", "small", "medium", "large"];

/** Orders sizes as people read them: nano … large, xlarge, 2xlarge … 48xlarge, metal. */
function sizeRank(type: string): number {
  const size = type.split(".").slice(1).join(".");
  const small = SMALL_SIZES.indexOf(size);
  if (small >= 0) return small;
  const x = /^(\d*)xlarge$/.exec(size);
  if (x) return SMALL_SIZES.length + Number(x[1] || 1);
  return 1000;
}

function positiveInt(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < 1) {
    throw new LimitsFlagError(`${flag}: "${v}" must be a whole number ≥ 1`);
  }
  return n;
}

/** The answer of `doctor maxpods`, as `--json` prints it. */
export interface MaxPodsAnswer {
  instanceType: string;
  maxPods: number;
  /** The formula with the numbers filled in. */
  formula: string;
  maxEnis: number;
  enisUsed: number;
  ipv4PerEni: number;
  addressesPerEni: number;
  prefixDelegation: boolean;
  excludePrimaryEni: boolean;
  cap?: number;
}

/** Computes `doctor maxpods`. */
export function maxPodsAnswer(f: MaxPodsFlags): MaxPodsAnswer {
  const l = limitsFor(f.instanceType);
  const maxEnisFlag = positiveInt("--max-enis", f.maxEnis);
  const vcpus = positiveInt("--vcpus", f.vcpus);
  if (f.excludePrimaryEni && Math.min(l.maxEnis, maxEnisFlag ?? l.maxEnis) < 2) {
    throw new LimitsFlagError(
      `--exclude-primary-eni: ${l.instanceType} would have no ENI left for pods ` +
        `(max ENIs ${Math.min(l.maxEnis, maxEnisFlag ?? l.maxEnis)})`,
    );
  }
  const o: MaxPodsOptions = {
    prefixDelegation: !!f.prefixDelegation,
    excludePrimaryEni: !!f.excludePrimaryEni,
    maxEnis: maxEnisFlag,
    cap: !!f.cap,
    vcpus,
  };
  const n = maxPods(l, o);
  const enisUsed = Math.min(l.maxEnis, maxEnisFlag ?? l.maxEnis) - (f.excludePrimaryEni ? 1 : 0);
  const perEni = (l.ipv4PerEni - 1) * (f.prefixDelegation ? 16 : 1);
  const uncapped = enisUsed * perEni + 2;
  const formula =
    `${enisUsed} ENIs × ${
      f.prefixDelegation ? `(${l.ipv4PerEni} − 1) × 16` : `(${l.ipv4PerEni} − 1)`
    } + 2 = ${uncapped}` + (n < uncapped ? `, capped to ${n}` : "");
  const out: MaxPodsAnswer = {
    instanceType: l.instanceType,
    maxPods: n,
    formula,
    maxEnis: l.maxEnis,
    enisUsed,
    ipv4PerEni: l.ipv4PerEni,
    addressesPerEni: perEni,
    prefixDelegation: !!f.prefixDelegation,
    excludePrimaryEni: !!f.excludePrimaryEni,
  };
  if (f.cap) out.cap = n < uncapped ? n : (vcpus !== undefined && vcpus > 30 ? 250 : 110);
  return out;
}

/** Lines of `doctor limits --instance-type T`. */
export function limitsLines(l: InstanceLimits): string[] {
  const cards = l.networkCards?.map((c) => `card ${c.index}: ${c.maxEnis} ENIs`).join(", ");
  const secondary = maxPods(l);
  return [
    `instance type      ${l.instanceType}`,
    `max ENIs           ${l.maxEnis} (on the default network card${cards ? `; ${cards}` : ""})`,
    `IPv4 per ENI       ${l.ipv4PerEni} (primary included)`,
    `hypervisor         ${l.hypervisor}${l.bareMetal ? ", bare metal" : ""}`,
    `pod addresses      ${l.maxEnis * (l.ipv4PerEni - 1)} secondary IPs` +
    `, ${l.maxEnis * (l.ipv4PerEni - 1) * 16} with /28 prefixes`,
    `max pods           ${secondary} (secondary IPs), ${maxPods(l, { prefixDelegation: true })}` +
    ` (prefixes), ${maxPods(l, { excludePrimaryEni: l.maxEnis > 1 })} (primary ENI excluded)`,
    `source             ${l.source === "ec2" ? "DescribeInstanceTypes" : "embedded limits table"}`,
  ];
}
