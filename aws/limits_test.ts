import assert from "node:assert/strict";
import {
  embeddedInstanceTypes,
  embeddedLimits,
  fromInstanceTypeInfo,
  type InstanceLimits,
  InstanceLimitsResolver,
  type InstanceTypeInfo,
  kubeletCap,
  maxPods,
  supportsPrefixDelegation,
} from "./limits.ts";

// Published max-pods values (secondary-IP mode) that operators see on EKS nodes.
const PUBLISHED_MAX_PODS: Record<string, number> = {
  "t2.micro": 4,
  "t2.small": 11,
  "t2.medium": 17,
  "t3.nano": 4,
  "t3.micro": 4,
  "t3.small": 11,
  "t3.medium": 17,
  "t3.large": 35,
  "t3.xlarge": 58,
  "t4g.nano": 4,
  "a1.medium": 8,
  "m5.large": 29,
  "m5.xlarge": 58,
  "m5.4xlarge": 234,
  "m5.16xlarge": 737,
  "m5.24xlarge": 737,
  "c5.large": 29,
  "c5.9xlarge": 234,
  "c5.18xlarge": 737,
  "m4.16xlarge": 234,
  "r5.large": 29,
  "x1.32xlarge": 234,
  "p3dn.24xlarge": 737,
  "p4d.24xlarge": 737,
  "m6i.32xlarge": 737,
};

function limits(type: string): InstanceLimits {
  const l = embeddedLimits(type);
  assert.ok(l, `${type} missing from the embedded table`);
  return l;
}

Deno.test("embedded table: holds every generated row and answers unknown types with undefined", () => {
  const types = embeddedInstanceTypes();
  assert.ok(types.length > 1000, `only ${types.length} types embedded`);
  assert.equal(embeddedLimits("nope.large"), undefined);
  assert.equal(embeddedLimits("toString"), undefined);
  assert.deepEqual(limits("m5.large"), {
    instanceType: "m5.large",
    maxEnis: 3,
    ipv4PerEni: 10,
    hypervisor: "nitro",
    bareMetal: false,
    networkCards: [{ index: 0, maxEnis: 3 }],
    defaultCard: 0,
    source: "embedded",
  });
  assert.equal(limits("c3.large").hypervisor, "xen");
  assert.equal(limits("m5.metal").bareMetal, true);
  assert.deepEqual(limits("c6in.32xlarge").networkCards, [
    { index: 0, maxEnis: 8 },
    { index: 1, maxEnis: 8 },
  ]);
});

Deno.test("maxPods: secondary-IP mode matches published values on many rows", () => {
  for (const [type, want] of Object.entries(PUBLISHED_MAX_PODS)) {
    assert.equal(maxPods(limits(type)), want, type);
  }
});

Deno.test("maxPods: prefix delegation multiplies every secondary slot by 16", () => {
  assert.equal(maxPods(limits("m5.large"), { prefixDelegation: true }), 3 * 9 * 16 + 2);
  assert.equal(maxPods(limits("t3.nano"), { prefixDelegation: true }), 34);
  assert.equal(maxPods(limits("m5.24xlarge"), { prefixDelegation: true }), 15 * 49 * 16 + 2);
});

Deno.test("maxPods: excluding the primary ENI and lowering the ENI count", () => {
  const m5 = limits("m5.large");
  assert.equal(maxPods(m5, { excludePrimaryEni: true }), 2 * 9 + 2);
  assert.equal(maxPods(m5, { maxEnis: 2 }), 2 * 9 + 2);
  assert.equal(maxPods(m5, { maxEnis: 1, excludePrimaryEni: true }), 2);
  assert.equal(maxPods(m5, { maxEnis: 99 }), 29, "maxEnis never raises the instance's count");
  assert.equal(maxPods(m5, { maxEnis: 2, prefixDelegation: true }), 2 * 9 * 16 + 2);
});

Deno.test("maxPods: kubelet cap is 110, or 250 above 30 vCPUs, and never raises", () => {
  const big = limits("m5.24xlarge");
  assert.equal(maxPods(big, { cap: true, vcpus: 96 }), 250);
  assert.equal(maxPods(big, { cap: true, vcpus: 30 }), 110);
  assert.equal(maxPods(big, { cap: true }), 110, "unknown vCPUs take the lower cap");
  assert.equal(maxPods({ ...big, vcpus: 96 }, { cap: true }), 250);
  assert.equal(maxPods(big, { cap: 500 }), 500);
  assert.equal(maxPods(limits("m5.large"), { cap: true, vcpus: 2 }), 29);
  assert.equal(maxPods(limits("m5.large"), { cap: true, vcpus: 2, prefixDelegation: true }), 110);
  assert.equal(kubeletCap(31), 250);
  assert.equal(kubeletCap(undefined), 110);
});

Deno.test("maxPods: invariants over every embedded row", () => {
  for (const type of embeddedInstanceTypes()) {
    const l = limits(type);
    const ips = maxPods(l);
    assert.equal(ips, l.maxEnis * (l.ipv4PerEni - 1) + 2, type);
    assert.equal(maxPods(l, { prefixDelegation: true }) - 2, (ips - 2) * 16, type);
    assert.ok(maxPods(l, { cap: true, vcpus: 64, prefixDelegation: true }) <= 250, type);
    assert.equal(supportsPrefixDelegation(l), l.hypervisor === "nitro" || l.bareMetal, type);
    assert.ok(maxPods(l, { excludePrimaryEni: true }) <= ips, type);
    assert.ok(maxPods(l, { cap: true }) <= 110, type);
    assert.ok(l.networkCards!.some((c) => c.index === l.defaultCard), type);
  }
});

Deno.test("prefix delegation: Nitro and bare metal can, Xen cannot; EC2's word wins", () => {
  assert.equal(supportsPrefixDelegation(limits("m5.large")), true);
  assert.equal(supportsPrefixDelegation(limits("m5.metal")), true);
  assert.equal(supportsPrefixDelegation(limits("c3.large")), false);
  assert.equal(supportsPrefixDelegation({ ...limits("m5.large"), prefixDelegation: false }), false);
});

Deno.test("maxPods: bad options are rejected with the option's name", () => {
  const l = limits("m5.large");
  assert.throws(() => maxPods(l, { maxEnis: 0 }), /maxEnis must be an integer >= 1, got 0/);
  assert.throws(() => maxPods(l, { maxEnis: 1.5 }), /maxEnis/);
  assert.throws(() => maxPods(l, { vcpus: -1 }), /vcpus/);
  assert.throws(() => maxPods({ ...l, ipv4PerEni: 0 }), /limits.ipv4PerEni/);
});

function source(answers: Record<string, InstanceTypeInfo>, fail = false) {
  const calls: string[][] = [];
  return {
    calls,
    describeInstanceTypes(types: string[]): Promise<InstanceTypeInfo[]> {
      calls.push(types);
      if (fail) return Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:1"));
      return Promise.resolve(types.flatMap((t) => answers[t] ? [answers[t]] : []));
    },
  };
}

Deno.test("resolver: EC2 answer wins, is cached, and keeps vCPUs for the cap", async () => {
  const ec2 = source({
    "m5.large": { instanceType: "m5.large", maxEnis: 3, ipv4PerEni: 10, vcpus: 2 },
  });
  const r = new InstanceLimitsResolver({ ec2 });
  const a = await r.get("m5.large");
  const b = await r.get("m5.large");
  assert.equal(a.source, "ec2");
  assert.equal(a.vcpus, 2);
  assert.equal(b, a);
  assert.equal(ec2.calls.length, 1);
});

Deno.test("resolver: falls back to the table when EC2 fails, and says why on unknown types", async () => {
  const fallbacks: string[] = [];
  const ec2 = source({}, true);
  const r = new InstanceLimitsResolver({ ec2, onFallback: (t) => fallbacks.push(t) });
  assert.equal((await r.get("t3.micro")).source, "embedded");
  assert.deepEqual(fallbacks, ["t3.micro"]);
  await assert.rejects(r.get("zz9.huge"), /unknown instance type 'zz9.huge'.*ECONNREFUSED/);
  // EC2 answered but did not know the type: the table still serves.
  const r2 = new InstanceLimitsResolver({ ec2: source({}) });
  assert.equal((await r2.get("c5.large")).maxEnis, 3);
});

Deno.test("fromInstanceTypeInfo: multi-card instances count only the default card's ENIs", () => {
  const l = fromInstanceTypeInfo({
    instanceType: "c6in.32xlarge",
    maxEnis: 16,
    ipv4PerEni: 50,
    networkCards: [{ index: 0, maxEnis: 8 }, { index: 1, maxEnis: 8 }],
    defaultCard: 0,
  });
  assert.equal(l.maxEnis, 8);
  assert.equal(maxPods(l), maxPods(limits("c6in.32xlarge")));
});
