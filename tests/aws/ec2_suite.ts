/**
 * The EC2 client suite, run unchanged against every EC2 we have (the simulator, moto's
 * server). A target starts an EC2 endpoint and seeds a world; `quirks` lists where the target
 * is known to differ from EC2, and each quirk is asserted too, so a fixed quirk shows up as
 * a failure to update the list rather than as silence.
 *
 * @module
 */
import assert from "node:assert/strict";
import {
  Ec2Client,
  type Ec2ClientOptions,
  Ec2Error,
  type FilteredAction,
  metricsSnapshot,
} from "../../aws/ec2.ts";
import { InstanceLimitsResolver, maxPods } from "../../aws/limits.ts";
import { freePort } from "../helpers/aws_peers.ts";

/** Known differences of a target from EC2. */
export type Quirk =
  /** AssignPrivateIpAddresses answers every IP of the ENI, not only the new ones. */
  | "assignAnswersAllIps"
  /** Ipv4PrefixCount is ignored: no /28 prefixes are delegated. */
  | "noPrefixDelegation"
  /** The same ClientToken makes a second ENI instead of returning the first. */
  | "clientTokenIgnored"
  /** Attaching beyond the instance type's ENI limit succeeds. */
  | "noEniLimit"
  /** Assigning beyond the per-ENI IPv4 limit succeeds. */
  | "noIpLimit"
  /** A second ENI at a device index in use is accepted. */
  | "deviceIndexReuse"
  /** MaxResults/NextToken are not honoured (one page). */
  | "noPagination"
  /** DescribeInstanceTypes gives no VCpuInfo. */
  | "noVcpuInfo"
  /** Throttling and 5xx cannot be injected. */
  | "noFaultInjection"
  /** DeleteNetworkInterface of an attached ENI succeeds. */
  | "deleteInUse"
  /** ModifyNetworkInterfaceAttribute ignores Attachment.DeleteOnTermination. */
  | "deleteOnTerminationIgnored"
  /** Security group ids that do not exist are accepted (create and modify). */
  | "unknownGroupAccepted"
  /** CreateTags on ids that do not exist succeeds. */
  | "tagsOnUnknownIds"
  /** AttachNetworkInterface of an ENI that is attached already succeeds (a new attachment). */
  | "reattachAttached"
  /** CreateNetworkInterface succeeds in a subnet with no free address left. */
  | "subnetOverfill"
  /** An unknown filter name answers HTTP 500 with an HTML page, not InvalidParameterValue. */
  | "unknownFilter500"
  /** Some filters EC2 documents answer HTTP 500 with an HTML page: `filtersAnswering500`. */
  | "filtersAnswer500"
  /** The XML namespace is `…/doc/2016-11-15`, without EC2's trailing `/`. */
  | "xmlnsWithoutSlash"
  /** No `privateDnsName` on an ENI or on its addresses. */
  | "noPrivateDnsName"
  /** `requesterId` of an ENI the account created is not the account's id. */
  | "requesterIdNotAccount"
  /** The error document's `<Response>` carries the EC2 namespace; EC2's has none. */
  | "errorXmlns";

/** The seeded world a target offers. */
export interface Ec2World {
  vpcId: string;
  vpcCidrs: string[];
  /** Subnet the instance is in, tagged `vpcni-zone=pods`. */
  subnetId: string;
  subnetCidr: string;
  az: string;
  /** A second subnet in the same VPC, tagged `vpcni-zone=other`. */
  otherSubnetId: string;
  /** A /28 in the same VPC and AZ as `subnetId`, untagged: 11 addresses free on EC2. */
  tinySubnetId: string;
  /** The account that owns (and created) everything in the world. */
  accountId: string;
  securityGroupIds: string[];
  instanceId: string;
  /** Instance type of `instanceId` (its ENI and IP limits are enforced where no quirk says). */
  instanceType: string;
}

/** A running EC2 endpoint. */
export interface Ec2Target {
  endpoint: string;
  region: string;
  world: Ec2World;
  quirks: ReadonlySet<Quirk>;
  /** With quirk `filtersAnswer500`: the filter names, per action, the target answers 500 for. */
  filtersAnswering500?: Partial<Record<FilteredAction, string[]>>;
  /** The next `times` EC2 requests fail with `code` (unless the target has noFaultInjection). */
  injectFault?: (f: { code: "RequestLimitExceeded" | "InternalError"; times: number }) => void;
  /** Delays every answer to `action` by `ms` (unless the target has noFaultInjection). */
  setLatency?: (action: string, ms: number) => void;
  close(): Promise<void>;
}

const CREDS = { accessKeyId: "test", secretAccessKey: "test" };

/** An EC2 client for the target (static test credentials), with option overrides. */
export function targetClient(t: Ec2Target, o: Partial<Ec2ClientOptions> = {}): Ec2Client {
  return new Ec2Client({ region: t.region, endpoint: t.endpoint, credentials: CREDS, ...o });
}

/** Polls `check` until it returns a value (not undefined) or the time is up. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  ms = 10_000,
) {
  const deadline = Date.now() + ms;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what}: not true within ${ms} ms${last ? ` (last error: ${last})` : ""}`);
}

function ipToInt(ip: string): number {
  return ip.split(".").reduce((a, o) => a * 256 + Number(o), 0);
}

function inCidr(ip: string, cidr: string): boolean {
  const [base, len] = cidr.split("/");
  const size = 2 ** (32 - Number(len));
  const start = Math.floor(ipToInt(base) / size) * size;
  return ipToInt(ip) >= start && ipToInt(ip) < start + size;
}

/** A suite test's body: the target (fresh for this test) and a client for it. */
export type SuiteTestFn = (target: Ec2Target, c: Ec2Client) => Promise<void>;

/**
 * A registrar of suite tests named `ec2[<name>]: <title>`: each test starts its own target and
 * client and closes both after.
 */
export function suiteTest(
  name: string,
  start: () => Promise<Ec2Target>,
): (title: string, fn: SuiteTestFn) => void {
  return (title, fn) =>
    Deno.test({
      name: `ec2[${name}]: ${title}`,
      sanitizeResources: false,
      sanitizeOps: false,
      fn: async () => {
        const target = await start();
        const c = targetClient(target);
        try {
          await fn(target, c);
        } finally {
          c.close();
          await target.close();
        }
      },
    });
}

/** Registers the suite's tests under `name`. */
export function ec2Suite(name: string, start: () => Promise<Ec2Target>): void {
  const t = suiteTest(name, start);
  const has = (target: Ec2Target, q: Quirk) => target.quirks.has(q);

  async function newEni(target: Ec2Target, c: Ec2Client, tags: Record<string, string> = {}) {
    const eni = await c.createNetworkInterface({
      subnetId: target.world.subnetId,
      securityGroupIds: target.world.securityGroupIds,
      description: "vpcni test",
      tags: { "vpcni.io/test": name, ...tags },
    });
    await eventually(
      `${eni.eniId} visible`,
      async () =>
        (await c.describeNetworkInterfaces({ ids: [eni.eniId] })).length ? true : undefined,
    );
    return eni;
  }

  t("DescribeVpcs: the VPC with all its CIDR blocks", async ({ world }, c) => {
    const [vpc] = await c.describeVpcs({ ids: [world.vpcId] });
    assert.equal(vpc.vpcId, world.vpcId);
    assert.deepEqual(vpc.cidrs, world.vpcCidrs);
    assert.ok((await c.describeVpcs()).some((v) => v.vpcId === world.vpcId));
  });

  t("DescribeSubnets: by VPC, by ids, by tag selector and by AZ", async ({ world }, c) => {
    const inVpc = await c.describeSubnets({ vpcId: world.vpcId });
    assert.deepEqual(
      inVpc.map((s) => s.subnetId).sort(),
      [world.subnetId, world.otherSubnetId, world.tinySubnetId].sort(),
    );
    const [s] = await c.describeSubnets({ ids: [world.subnetId] });
    assert.equal(s.cidr, world.subnetCidr);
    assert.equal(s.az, world.az);
    assert.equal(s.vpcId, world.vpcId);
    assert.ok(
      s.availableIpCount > 0 && s.availableIpCount < 2 ** (32 - Number(s.cidr.split("/")[1])),
    );
    assert.equal(s.tags["vpcni-zone"], "pods");
    const tagged = await c.describeSubnets({ vpcId: world.vpcId, tags: { "vpcni-zone": "pods" } });
    assert.deepEqual(tagged.map((x) => x.subnetId), [world.subnetId]);
    const anyZone = await c.describeSubnets({ vpcId: world.vpcId, tags: { "vpcni-zone": "*" } });
    assert.equal(anyZone.length, 2);
    const inAz = await c.describeSubnets({ vpcId: world.vpcId, az: world.az });
    assert.ok(inAz.some((x) => x.subnetId === world.subnetId));
  });

  t("DescribeSecurityGroups: by ids and by VPC", async ({ world }, c) => {
    const byId = await c.describeSecurityGroups({ ids: world.securityGroupIds });
    assert.deepEqual(byId.map((g) => g.groupId).sort(), [...world.securityGroupIds].sort());
    assert.ok(byId.every((g) => g.vpcId === world.vpcId && g.groupName.length > 0));
    const inVpc = await c.describeSecurityGroups({ vpcId: world.vpcId });
    for (const id of world.securityGroupIds) assert.ok(inVpc.some((g) => g.groupId === id), id);
  });

  t("DescribeInstances: type, placement and the primary ENI at index 0", async ({ world }, c) => {
    const [i] = await c.describeInstances({ ids: [world.instanceId] });
    assert.equal(i.instanceId, world.instanceId);
    assert.equal(i.instanceType, world.instanceType);
    assert.equal(i.az, world.az);
    assert.equal(i.subnetId, world.subnetId);
    assert.equal(i.vpcId, world.vpcId);
    assert.equal(i.enis[0]?.deviceIndex, 0);
    assert.ok(i.privateIp && inCidr(i.privateIp, world.subnetCidr), i.privateIp);
    assert.equal(i.enis[0].privateIp, i.privateIp);
    const all = await c.describeInstances({ filters: { "vpc-id": [world.vpcId] } });
    assert.ok(all.some((x) => x.instanceId === world.instanceId));
  });

  t("DescribeInstanceTypes: limits and vCPUs feed the limits resolver", async (target, c) => {
    const { world } = target;
    const [info] = await c.describeInstanceTypes([world.instanceType]);
    assert.equal(info.instanceType, world.instanceType);
    assert.ok(info.maxEnis >= 2 && info.ipv4PerEni >= 2, JSON.stringify(info));
    if (has(target, "noVcpuInfo")) assert.equal(info.vcpus, undefined);
    else assert.ok((info.vcpus ?? 0) >= 1, "vcpus");
    const limits = await new InstanceLimitsResolver({ ec2: c }).get(world.instanceType);
    assert.equal(limits.source, "ec2");
    assert.equal(maxPods(limits), limits.maxEnis * (limits.ipv4PerEni - 1) + 2);
    await assert.rejects(
      c.describeInstanceTypes(["zz9.plural"]),
      (e: unknown) => e instanceof Ec2Error && e.code.startsWith("InvalidInstanceType"),
    );
  });

  t(
    "CreateNetworkInterface: subnet, groups, description, tags and a primary IP",
    async (target, c) => {
      const { world } = target;
      const eni = await newEni(target, c, { "vpcni.io/instance": world.instanceId });
      assert.match(eni.eniId, /^eni-[0-9a-f]+$/);
      assert.equal(eni.subnetId, world.subnetId);
      assert.equal(eni.vpcId, world.vpcId);
      assert.equal(eni.az, world.az);
      assert.equal(eni.status, "available");
      assert.equal(eni.description, "vpcni test");
      assert.deepEqual(eni.securityGroupIds.sort(), [...world.securityGroupIds].sort());
      assert.ok(inCidr(eni.privateIp, world.subnetCidr));
      assert.deepEqual(eni.privateIps, [{ ip: eni.privateIp, primary: true }]);
      assert.match(eni.mac, /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
      assert.equal(eni.tags["vpcni.io/instance"], world.instanceId);
      const found = await c.describeNetworkInterfaces({
        tags: { "vpcni.io/instance": world.instanceId },
      });
      assert.deepEqual(found.map((e) => e.eniId), [eni.eniId]);
      const some = await c.describeNetworkInterfaces({
        ids: [eni.eniId, "eni-0000000000000dead"],
        ignoreMissing: true,
      });
      assert.deepEqual(some.map((e) => e.eniId), [eni.eniId]);
      assert.equal(c.metrics.calls.get("CreateNetworkInterface"), 1);
    },
  );

  t("CreateNetworkInterface: a repeated ClientToken returns the same ENI", async (target, c) => {
    const input = {
      subnetId: target.world.subnetId,
      securityGroupIds: target.world.securityGroupIds,
      clientToken: `vpcni-${crypto.randomUUID()}`,
    };
    const a = await c.createNetworkInterface(input);
    const b = await c.createNetworkInterface(input);
    if (has(target, "clientTokenIgnored")) {
      assert.notEqual(a.eniId, b.eniId, "quirk clientTokenIgnored no longer holds");
    } else {
      assert.equal(b.eniId, a.eniId);
    }
  });

  t("Attach, Detach and Delete: the ENI's life on an instance", async (target, c) => {
    const { world } = target;
    const eni = await newEni(target, c);
    const attachmentId = await c.attachNetworkInterface({
      eniId: eni.eniId,
      instanceId: world.instanceId,
      deviceIndex: 1,
    });
    assert.match(attachmentId, /^eni-attach-[0-9a-f]+$/);
    const attached = await eventually("attached", async () => {
      const [e] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
      return e.attachment?.status === "attached" ? e : undefined;
    });
    assert.equal(attached.status, "in-use");
    assert.equal(attached.attachment?.attachmentId, attachmentId);
    assert.equal(attached.attachment?.deviceIndex, 1);
    assert.equal(attached.attachment?.instanceId, world.instanceId);
    const onInstance = await c.describeNetworkInterfaces({ instanceId: world.instanceId });
    assert.ok(onInstance.some((e) => e.eniId === eni.eniId));
    const [inst] = await c.describeInstances({ ids: [world.instanceId] });
    assert.deepEqual(inst.enis.find((e) => e.eniId === eni.eniId)?.deviceIndex, 1);

    // In use: cannot be deleted.
    if (!has(target, "deleteInUse")) {
      await assert.rejects(
        c.deleteNetworkInterface(eni.eniId),
        (e: unknown) => e instanceof Ec2Error && e.code === "InvalidNetworkInterface.InUse",
      );
    }
    await c.detachNetworkInterface({ attachmentId });
    await eventually("detached", async () => {
      const [e] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
      return e.status === "available" ? e : undefined;
    });
    await c.deleteNetworkInterface(eni.eniId);
    await assert.rejects(
      c.describeNetworkInterfaces({ ids: [eni.eniId] }),
      (e: unknown) =>
        e instanceof Ec2Error && e.code === "InvalidNetworkInterfaceID.NotFound" &&
        e.action === "DescribeNetworkInterfaces" && e.httpStatus === 400 && !!e.requestId,
    );
    assert.equal(
      c.metrics.errors.get("DescribeNetworkInterfaces:InvalidNetworkInterfaceID.NotFound"),
      1,
    );
  });

  t("AttachNetworkInterface: a device index already in use is refused", async (target, c) => {
    const { world } = target;
    const a = await newEni(target, c);
    const b = await newEni(target, c);
    await c.attachNetworkInterface({
      eniId: a.eniId,
      instanceId: world.instanceId,
      deviceIndex: 2,
    });
    const second = c.attachNetworkInterface({
      eniId: b.eniId,
      instanceId: world.instanceId,
      deviceIndex: 2,
    });
    if (has(target, "deviceIndexReuse")) {
      await second;
    } else {
      await assert.rejects(
        second,
        (e: unknown) => e instanceof Ec2Error && e.code === "InvalidParameterValue",
      );
    }
  });

  t("AttachNetworkInterface: the instance's ENI limit is enforced", async (target, c) => {
    const { world } = target;
    const [info] = await c.describeInstanceTypes([world.instanceType]);
    let err: unknown;
    for (let idx = 1; idx <= info.maxEnis && !err; idx++) {
      const eni = await newEni(target, c);
      await c.attachNetworkInterface({
        eniId: eni.eniId,
        instanceId: world.instanceId,
        deviceIndex: idx,
      })
        .catch((e) => (err = e));
    }
    if (has(target, "noEniLimit")) {
      assert.equal(err, undefined, "quirk noEniLimit no longer holds");
    } else {
      assert.ok(err instanceof Ec2Error, String(err));
      assert.equal(err.code, "AttachmentLimitExceeded");
    }
  });

  t("Assign and Unassign private IPs: by count and by address", async (target, c) => {
    const eni = await newEni(target, c);
    const got = await c.assignPrivateIpAddresses({ eniId: eni.eniId, count: 3 });
    const fresh = got.ips.filter((ip) => ip !== eni.privateIp);
    if (has(target, "assignAnswersAllIps")) {
      assert.ok(got.ips.includes(eni.privateIp), "quirk assignAnswersAllIps no longer holds");
    } else {
      assert.equal(got.ips.length, 3);
    }
    assert.equal(fresh.length, 3);
    assert.ok(fresh.every((ip) => inCidr(ip, target.world.subnetCidr)));
    let [d] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
    assert.equal(d.privateIps[0].ip, eni.privateIp);
    assert.deepEqual(d.privateIps.slice(1).map((p) => p.ip).sort(), [...fresh].sort());

    // A chosen address: the next free one after the ENI's primary is unlikely to be taken.
    const wanted = [...Array(50).keys()].map((k) => {
      const n = ipToInt(eni.privateIp) + 20 + k;
      return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
    }).find((ip) => inCidr(ip, target.world.subnetCidr) && !d.privateIps.some((p) => p.ip === ip))!;
    const chosen = await c.assignPrivateIpAddresses({ eniId: eni.eniId, ips: [wanted] });
    assert.ok(chosen.ips.includes(wanted));

    await c.unassignPrivateIpAddresses({ eniId: eni.eniId, ips: [fresh[0], wanted] });
    [d] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
    assert.deepEqual(
      d.privateIps.map((p) => p.ip).sort(),
      [eni.privateIp, fresh[1], fresh[2]].sort(),
    );
  });

  t("AssignPrivateIpAddresses: the per-ENI IPv4 limit is enforced", async (target, c) => {
    const [info] = await c.describeInstanceTypes([target.world.instanceType]);
    const eni = await newEni(target, c);
    const attach = await c.attachNetworkInterface({
      eniId: eni.eniId,
      instanceId: target.world.instanceId,
      deviceIndex: 1,
    });
    assert.ok(attach);
    const over = c.assignPrivateIpAddresses({ eniId: eni.eniId, count: info.ipv4PerEni });
    if (has(target, "noIpLimit")) {
      await over;
    } else {
      await assert.rejects(
        over,
        (e: unknown) => e instanceof Ec2Error && e.code === "PrivateIpAddressLimitExceeded",
      );
      const ok = await c.assignPrivateIpAddresses({ eniId: eni.eniId, count: info.ipv4PerEni - 1 });
      assert.equal(ok.ips.length, info.ipv4PerEni - 1);
    }
  });

  t("Assign and Unassign /28 prefixes", async (target, c) => {
    const eni = await newEni(target, c);
    const got = await c.assignPrivateIpAddresses({ eniId: eni.eniId, prefixCount: 2 });
    if (has(target, "noPrefixDelegation")) {
      assert.deepEqual(got.prefixes, [], "quirk noPrefixDelegation no longer holds");
      return;
    }
    assert.equal(got.prefixes.length, 2);
    for (const p of got.prefixes) {
      assert.match(p, /\/28$/);
      assert.ok(inCidr(p.split("/")[0], target.world.subnetCidr));
      assert.equal(ipToInt(p.split("/")[0]) % 16, 0, `${p} is aligned`);
    }
    let [d] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
    assert.deepEqual([...d.ipv4Prefixes].sort(), [...got.prefixes].sort());
    await c.unassignPrivateIpAddresses({ eniId: eni.eniId, prefixes: [got.prefixes[0]] });
    [d] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
    assert.deepEqual(d.ipv4Prefixes, [got.prefixes[1]]);
  });

  t(
    "ModifyNetworkInterfaceAttribute: groups, source/dest check, delete-on-termination",
    async (target, c) => {
      const { world } = target;
      const eni = await newEni(target, c);
      await c.modifyNetworkInterfaceAttribute({
        eniId: eni.eniId,
        groups: [world.securityGroupIds[0]],
      });
      await c.modifyNetworkInterfaceAttribute({ eniId: eni.eniId, sourceDestCheck: false });
      let [d] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
      assert.deepEqual(d.securityGroupIds, [world.securityGroupIds[0]]);
      assert.equal(d.sourceDestCheck, false);
      await assert.rejects(
        c.modifyNetworkInterfaceAttribute({ eniId: eni.eniId, deleteOnTermination: true }),
        /not attached/,
      );
      await c.attachNetworkInterface({
        eniId: eni.eniId,
        instanceId: world.instanceId,
        deviceIndex: 1,
      });
      await c.modifyNetworkInterfaceAttribute({ eniId: eni.eniId, deleteOnTermination: true });
      [d] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
      assert.equal(d.attachment?.deleteOnTermination, !has(target, "deleteOnTerminationIgnored"));
      const unknownGroup = c.modifyNetworkInterfaceAttribute({
        eniId: eni.eniId,
        groups: ["sg-0000000000000dead"],
      });
      if (has(target, "unknownGroupAccepted")) await unknownGroup;
      else {
        await assert.rejects(
          unknownGroup,
          (e: unknown) => e instanceof Ec2Error && e.code.startsWith("InvalidGroup"),
        );
      }
    },
  );

  t("CreateTags: tags show up and select", async (target, c) => {
    const eni = await newEni(target, c);
    const stamp = new Date(0).toISOString();
    await c.createTags([eni.eniId], { "vpcni.io/cluster": "c1", "vpcni.io/created": stamp });
    const [d] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
    assert.equal(d.tags["vpcni.io/cluster"], "c1");
    assert.equal(d.tags["vpcni.io/created"], stamp);
    const sel = await c.describeNetworkInterfaces({ tags: { "vpcni.io/cluster": "c1" } });
    assert.deepEqual(sel.map((e) => e.eniId), [eni.eniId]);
  });

  t("pagination: every page is fetched and counted", async (target) => {
    const c = targetClient(target, { pageSize: 5 });
    try {
      const ids = new Set<string>();
      for (let i = 0; i < 7; i++) {
        ids.add((await newEni(target, c, { "vpcni.io/page": "p" })).eniId);
      }
      const before = c.metrics.calls.get("DescribeNetworkInterfaces") ?? 0;
      const all = await c.describeNetworkInterfaces({ tags: { "vpcni.io/page": "p" } });
      assert.deepEqual(new Set(all.map((e) => e.eniId)), ids);
      const pages = (c.metrics.calls.get("DescribeNetworkInterfaces") ?? 0) - before;
      if (has(target, "noPagination")) assert.equal(pages, 1);
      else assert.equal(pages, 2);
      const snap = metricsSnapshot(c.metrics);
      assert.equal(snap.calls.DescribeNetworkInterfaces, before + pages);
      assert.equal(snap.calls.CreateNetworkInterface, 7);
      assert.deepEqual(JSON.parse(JSON.stringify(snap)), snap);
    } finally {
      c.close();
    }
  });

  t("unknown ids and bad references are typed errors with EC2's codes", async (target, c) => {
    const { world } = target;
    const code = async (p: Promise<unknown>) => {
      const e = await p.then(() => undefined, (e) => e);
      assert.ok(e instanceof Ec2Error, `expected Ec2Error, got ${e}`);
      return e.code;
    };
    assert.equal(
      await code(
        c.createNetworkInterface({ subnetId: "subnet-0000000000000dead", securityGroupIds: [] }),
      ),
      "InvalidSubnetID.NotFound",
    );
    const unknownGroup = c.createNetworkInterface({
      subnetId: world.subnetId,
      securityGroupIds: ["sg-0000000000000dead"],
    });
    if (has(target, "unknownGroupAccepted")) await unknownGroup;
    else assert.match(await code(unknownGroup), /^InvalidGroup/);
    const unknownTagged = c.createTags(["eni-0000000000000dead"], { a: "b" });
    if (has(target, "tagsOnUnknownIds")) await unknownTagged;
    else assert.match(await code(unknownTagged), /NotFound$/);
    assert.equal(
      await code(c.detachNetworkInterface({ attachmentId: "eni-attach-0000000000000dead" })),
      "InvalidAttachmentID.NotFound",
    );
    assert.equal(
      await code(c.deleteNetworkInterface("eni-0000000000000dead")),
      "InvalidNetworkInterfaceID.NotFound",
    );
    assert.equal(
      await code(c.describeSubnets({ ids: ["subnet-0000000000000dead"] })),
      "InvalidSubnetID.NotFound",
    );
    assert.equal(
      await code(c.describeInstances({ ids: ["i-0000000000000dead"] })),
      "InvalidInstanceID.NotFound",
    );
    assert.equal(
      await code(
        c.attachNetworkInterface({
          eniId: "eni-0000000000000dead",
          instanceId: world.instanceId,
          deviceIndex: 1,
        }),
      ),
      "InvalidNetworkInterfaceID.NotFound",
    );
    assert.equal(
      await code(c.assignPrivateIpAddresses({ eniId: "eni-0000000000000dead", count: 1 })),
      "InvalidNetworkInterfaceID.NotFound",
    );
    assert.equal(c.metrics.retries, 0, "client errors are not retried");
  });

  t("bad input is refused before any request, naming the field", async ({ world }, c) => {
    const refused = async (p: Promise<unknown>, re: RegExp) => {
      await assert.rejects(
        p,
        (e: unknown) => e instanceof Ec2Error && e.code === "InvalidInput" && re.test(e.message),
      );
    };
    await refused(c.createNetworkInterface({ subnetId: "nope", securityGroupIds: [] }), /subnetId/);
    await refused(
      c.attachNetworkInterface({
        eniId: "eni-0123456789abcdef0",
        instanceId: world.instanceId,
        deviceIndex: -1,
      }),
      /deviceIndex/,
    );
    await refused(c.assignPrivateIpAddresses({ eniId: "eni-0123456789abcdef0" }), /exactly one of/);
    await refused(
      c.assignPrivateIpAddresses({ eniId: "eni-0123456789abcdef0", ips: ["10.0.0.300"] }),
      /IPv4/,
    );
    await refused(
      c.unassignPrivateIpAddresses({ eniId: "eni-0123456789abcdef0", prefixes: ["10.0.0.0/24"] }),
      /\/28/,
    );
    await refused(c.createTags([], { a: "b" }), /resource id/);
    await refused(c.describeInstanceTypes(["m5 large"]), /instance types/);
    await refused(
      c.modifyNetworkInterfaceAttribute({ eniId: "eni-0123456789abcdef0" }),
      /nothing to modify/,
    );
    assert.equal(c.metrics.calls.size, 0, "no request was sent");
    assert.throws(
      () => new Ec2Client({ region: "mars", endpoint: "http://127.0.0.1:1" }),
      /region/,
    );
    assert.throws(
      () => new Ec2Client({ region: "us-east-1", endpoint: "127.0.0.1:1" }),
      /endpoint/,
    );
  });

  t("client-side buckets pace a burst instead of letting EC2 throttle it", async (target) => {
    const c = targetClient(target, {
      buckets: { nonMutating: { capacity: 2, refillPerSecond: 20 } },
    });
    try {
      await Promise.all([...Array(6)].map(() => c.describeVpcs({ ids: [target.world.vpcId] })));
      assert.equal(c.metrics.calls.get("DescribeVpcs"), 6);
      assert.ok(c.metrics.throttleWaitMs > 0, "the burst waited for tokens");
      assert.equal(c.metrics.throttles, 0);
    } finally {
      c.close();
    }
  });

  t("RequestLimitExceeded and 5xx are retried with backoff and counted", async (target, c) => {
    if (has(target, "noFaultInjection")) {
      assert.equal(target.injectFault, undefined);
      return;
    }
    target.injectFault!({ code: "RequestLimitExceeded", times: 2 });
    const subnets = await c.describeSubnets({ ids: [target.world.subnetId] });
    assert.equal(subnets.length, 1);
    assert.equal(c.metrics.throttles, 2);
    assert.equal(c.metrics.errors.get("DescribeSubnets:RequestLimitExceeded"), 2);
    const before =
      (await c.describeNetworkInterfaces({ filters: { "subnet-id": [target.world.subnetId] } }))
        .length;
    target.injectFault!({ code: "InternalError", times: 1 });
    await c.createNetworkInterface({ subnetId: target.world.subnetId, securityGroupIds: [] });
    const after =
      (await c.describeNetworkInterfaces({ filters: { "subnet-id": [target.world.subnetId] } }))
        .length;
    assert.equal(after, before + 1, "a retried create made exactly one ENI");
    assert.equal(c.metrics.retries, 3);
    assert.equal(c.metrics.errors.get("CreateNetworkInterface:InternalError"), 1);
    const nc = targetClient(target, { maxAttempts: 2, retry: { baseDelayMs: 1 } });
    try {
      target.injectFault!({ code: "RequestLimitExceeded", times: 5 });
      await assert.rejects(
        nc.describeVpcs(),
        (e: unknown) =>
          e instanceof Ec2Error && e.code === "RequestLimitExceeded" && e.attempts === 2,
      );
    } finally {
      nc.close();
    }
  });

  t(
    "a create whose answer is lost is retried with its ClientToken: one ENI, not two",
    async (target) => {
      if (has(target, "noFaultInjection")) {
        assert.equal(target.setLatency, undefined);
        return;
      }
      const c = targetClient(target, {
        attemptTimeoutMs: 300,
        retry: { baseDelayMs: 50 },
        // The first attempt's answer is lost; the retry finds a fast EC2.
        onRetry: () => target.setLatency!("CreateNetworkInterface", 0),
      });
      try {
        const list = () => c.describeNetworkInterfaces({ tags: { "vpcni.io/lost": "1" } });
        target.setLatency!("CreateNetworkInterface", 800);
        const eni = await c.createNetworkInterface({
          subnetId: target.world.subnetId,
          securityGroupIds: [],
          tags: { "vpcni.io/lost": "1" },
        });
        target.setLatency!("CreateNetworkInterface", 0);
        assert.ok(
          (c.metrics.errors.get("CreateNetworkInterface:Timeout") ?? 0) >= 1,
          "an attempt timed out",
        );
        const all = await eventually("the ENI is visible", async () => {
          const l = await list();
          return l.length ? l : undefined;
        });
        // Give a straggling first attempt time to land before counting.
        await new Promise((r) => setTimeout(r, 1000));
        assert.deepEqual((await list()).map((e) => e.eniId), [eni.eniId]);
        assert.equal(all.length, 1);
      } finally {
        c.close();
      }
    },
  );

  t(
    "attach and delete whose answers are lost still end in one attachment / a deleted ENI",
    async (target) => {
      if (has(target, "noFaultInjection")) {
        assert.equal(target.setLatency, undefined);
        return;
      }
      let slow = "";
      // Each first attempt lands at 400 ms, after its 200 ms timeout and before its retry at
      // ~600 ms (the jitter is pinned): the retry meets the effect of the attempt it replaces.
      const c = targetClient(target, {
        attemptTimeoutMs: 200,
        retry: { baseDelayMs: 400, maxDelayMs: 400 },
        random: () => 0.99,
        onRetry: () => target.setLatency!(slow, 0),
      });
      try {
        const eni = await newEni(target, c);
        slow = "AttachNetworkInterface";
        target.setLatency!(slow, 400);
        const attachmentId = await c.attachNetworkInterface({
          eniId: eni.eniId,
          instanceId: target.world.instanceId,
          deviceIndex: 1,
        });
        assert.ok((c.metrics.errors.get("AttachNetworkInterface:Timeout") ?? 0) >= 1);
        const [d] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
        assert.equal(d.attachment?.attachmentId, attachmentId, "the first attempt's attachment");

        await c.detachNetworkInterface({ attachmentId });
        await eventually("detached", async () => {
          const [e] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
          return e.status === "available" ? e : undefined;
        });
        slow = "DeleteNetworkInterface";
        target.setLatency!(slow, 400);
        await c.deleteNetworkInterface(eni.eniId);
        assert.ok((c.metrics.errors.get("DeleteNetworkInterface:Timeout") ?? 0) >= 1);
        await assert.rejects(
          c.describeNetworkInterfaces({ ids: [eni.eniId] }),
          (e: unknown) => e instanceof Ec2Error && e.code === "InvalidNetworkInterfaceID.NotFound",
        );
      } finally {
        c.close();
      }
    },
  );
}

/** Endpoint-failure tests (no EC2 needed). */
export function ec2FailureTests(): void {
  Deno.test({
    name: "ec2: a refused endpoint is a clear EndpointUnreachable error, not a hang",
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const endpoint = `http://127.0.0.1:${freePort()}`;
      const c = new Ec2Client({
        region: "us-east-1",
        endpoint,
        credentials: CREDS,
        retry: { deadlineMs: 3000 },
      });
      try {
        await assert.rejects(
          c.describeSubnets(),
          (e: unknown) =>
            e instanceof Ec2Error && e.code === "EndpointUnreachable" &&
            e.message.includes(endpoint) &&
            e.attempts >= 1,
        );
      } finally {
        c.close();
      }
    },
  });
}
