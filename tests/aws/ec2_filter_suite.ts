/**
 * The EC2 suite's filter tests, run against every target: each filter the client is given
 * reaches EC2 and narrows the answer (values of one filter OR-ed, filters AND-ed), a filter the
 * client cannot send is refused before any request, and the target implements every filter
 * name the client may send.
 *
 * @module
 */
import assert from "node:assert/strict";
import * as sdk from "@aws-sdk/client-ec2";
import {
  type Ec2Client,
  Ec2Error,
  Ec2FilterError,
  FILTER_NAMES,
  type FilteredAction,
  type NetworkInterface,
} from "../../aws/ec2.ts";
import { type Ec2Target, eventually, suiteTest, targetClient } from "./ec2_suite.ts";

/** Ids of the ENIs a list holds, sorted. */
const idsOf = (enis: NetworkInterface[]) => enis.map((e) => e.eniId).sort();

/** Two ENIs: `here` in the instance's subnet, attached at index 1; `there` in the other one. */
async function twoEnis(target: Ec2Target, c: Ec2Client) {
  const { world } = target;
  const make = (subnetId: string) =>
    c.createNetworkInterface({ subnetId, securityGroupIds: world.securityGroupIds });
  const here = await make(world.subnetId);
  const there = await make(world.otherSubnetId);
  await eventually(
    "both ENIs visible",
    async () =>
      (await c.describeNetworkInterfaces({ ids: [here.eniId, there.eniId] })).length === 2
        ? true
        : undefined,
  );
  await c.attachNetworkInterface({
    eniId: here.eniId,
    instanceId: world.instanceId,
    deviceIndex: 1,
  });
  await eventually("attached", async () => {
    const [e] = await c.describeNetworkInterfaces({ ids: [here.eniId] });
    return e.attachment?.status === "attached" ? true : undefined;
  });
  return { here: here.eniId, there: there.eniId };
}

/** One request of `action` with `filters`, sent with the SDK as it is (no client checks). */
function rawDescribe(action: FilteredAction, Filters: sdk.Filter[]) {
  switch (action) {
    case "DescribeNetworkInterfaces":
      return new sdk.DescribeNetworkInterfacesCommand({ Filters });
    case "DescribeSubnets":
      return new sdk.DescribeSubnetsCommand({ Filters });
    case "DescribeInstances":
      return new sdk.DescribeInstancesCommand({ Filters });
    case "DescribeVpcs":
      return new sdk.DescribeVpcsCommand({ Filters });
    case "DescribeSecurityGroups":
      return new sdk.DescribeSecurityGroupsCommand({ Filters });
  }
}

/** The error a raw SDK call fails with, or undefined when it succeeds. */
async function rawFailure(target: Ec2Target, command: unknown) {
  const ec2 = new sdk.EC2Client({
    region: target.region,
    endpoint: target.endpoint,
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts: 1,
  });
  try {
    // deno-lint-ignore no-explicit-any
    await ec2.send(command as any);
    return undefined;
  } catch (e) {
    return e as Error & { $metadata?: { httpStatusCode?: number } };
  } finally {
    ec2.destroy();
  }
}

/** Registers the filter tests under `name`. */
export function ec2FilterSuite(name: string, start: () => Promise<Ec2Target>): void {
  const t = suiteTest(name, start);
  const has = (target: Ec2Target, q: Parameters<Ec2Target["quirks"]["has"]>[0]) =>
    target.quirks.has(q);
  const fails500 = (target: Ec2Target, action: FilteredAction, filter: string) =>
    has(target, "filtersAnswer500") &&
    !!target.filtersAnswering500?.[action]?.includes(filter);

  t("filters reach EC2: ENIs of other subnets and instances stay out", async (target, c) => {
    const { world } = target;
    const { here, there } = await twoEnis(target, c);
    const mine = (enis: NetworkInterface[]) =>
      idsOf(enis).filter((id) => id === here || id === there);

    // The query's own fields and the same filters given by name narrow alike.
    assert.deepEqual(mine(await c.describeNetworkInterfaces({ subnetId: world.subnetId })), [here]);
    assert.deepEqual(
      mine(await c.describeNetworkInterfaces({ filters: { "subnet-id": [world.otherSubnetId] } })),
      [there],
    );
    const onInstance = await c.describeNetworkInterfaces({ instanceId: world.instanceId });
    assert.ok(onInstance.every((e) => e.attachment?.instanceId === world.instanceId));
    assert.deepEqual(mine(onInstance), [here]);
    assert.deepEqual(
      mine(
        await c.describeNetworkInterfaces({
          filters: { "attachment.instance-id": [world.instanceId] },
        }),
      ),
      [here],
    );
    // ids as a filter: unknown ids are simply absent.
    assert.deepEqual(
      idsOf(
        await c.describeNetworkInterfaces({
          ids: [there, "eni-0000000000000dead"],
          ignoreMissing: true,
        }),
      ),
      [there],
    );
    assert.deepEqual(
      idsOf(await c.describeNetworkInterfaces({ filters: { "network-interface-id": [here] } })),
      [here],
    );
    // Values of one filter OR; filters AND.
    assert.deepEqual(
      mine(
        await c.describeNetworkInterfaces({
          filters: { "subnet-id": [world.subnetId, world.otherSubnetId] },
        }),
      ),
      [here, there].sort(),
    );
    assert.deepEqual(
      await c.describeNetworkInterfaces({
        subnetId: world.subnetId,
        filters: { "network-interface-id": [there] },
      }),
      [],
    );
    assert.deepEqual(
      mine(await c.describeNetworkInterfaces({ filters: { status: ["available"] } })),
      [there],
    );

    // Subnets by VPC and AZ; a VPC that does not exist matches nothing.
    const inAz = await c.describeSubnets({ vpcId: world.vpcId, az: world.az });
    assert.ok(inAz.some((s) => s.subnetId === world.subnetId));
    assert.ok(inAz.every((s) => s.az === world.az && s.subnetId !== world.otherSubnetId));
    assert.deepEqual(
      (await c.describeSubnets({ filters: { "availability-zone": [world.az] } }))
        .filter((s) => s.vpcId === world.vpcId).map((s) => s.subnetId).sort(),
      inAz.map((s) => s.subnetId).sort(),
    );
    assert.deepEqual(await c.describeSubnets({ vpcId: "vpc-0000000000000dead" }), []);
    assert.deepEqual(
      await c.describeSecurityGroups({ filters: { "vpc-id": ["vpc-0000000000000dead"] } }),
      [],
    );
  });

  t("filters on the attachment: status and device index", async (target, c) => {
    const { here, there } = await twoEnis(target, c);
    const once = targetClient(target, { maxAttempts: 1 });
    const cases = [["attachment.status", "attached"], ["attachment.device-index", "1"]];
    for (const [filter, value] of cases) {
      const query = once.describeNetworkInterfaces({ filters: { [filter]: [value] } });
      if (fails500(target, "DescribeNetworkInterfaces", filter)) {
        // Asserted so the list is updated once the target implements the filter.
        await assert.rejects(query, (e: unknown) => e instanceof Ec2Error && e.httpStatus === 500);
        continue;
      }
      const ids = idsOf(await query);
      assert.ok(ids.includes(here), `${filter}=${value} finds the attached ENI`);
      assert.ok(!ids.includes(there), `${filter}=${value} leaves the detached ENI out`);
    }
    once.close();
  });

  t("a filter the client cannot send is refused before any request, naming it", async (_, c) => {
    const refused = async (p: Promise<unknown>, filter: string, re: RegExp) => {
      await assert.rejects(p, (e: unknown) => {
        assert.ok(e instanceof Ec2FilterError, `expected Ec2FilterError, got ${e}`);
        assert.equal(e.code, "InvalidFilter");
        assert.equal(e.filter, filter);
        assert.match(e.message, re);
        return true;
      });
    };
    await refused(
      c.describeNetworkInterfaces({ filters: { "subnet": ["subnet-0123456789abcdef0"] } }),
      "subnet",
      /DescribeNetworkInterfaces cannot filter by 'subnet'; it takes .*subnet-id/,
    );
    await refused(
      c.describeSubnets({ filters: { "attachment.status": ["attached"] } }),
      "attachment.status",
      /DescribeSubnets cannot filter by/,
    );
    await refused(
      c.describeNetworkInterfaces({
        subnetId: "subnet-0123456789abcdef0",
        filters: { "subnet-id": ["subnet-0123456789abcdef1"] },
      }),
      "subnet-id",
      /given twice \(subnetId and filters\["subnet-id"\]\)/,
    );
    await refused(
      c.describeSubnets({ az: "us-east-1a", filters: { "availability-zone": ["us-east-1b"] } }),
      "availability-zone",
      /given twice/,
    );
    await refused(
      c.describeVpcs({ filters: { "vpc-id": [] } }),
      "vpc-id",
      /non-empty list of strings/,
    );
    await refused(
      // deno-lint-ignore no-explicit-any
      c.describeVpcs({ filters: { "vpc-id": "vpc-0123456789abcdef0" as any } }),
      "vpc-id",
      /non-empty list of strings/,
    );
    await refused(
      // deno-lint-ignore no-explicit-any
      c.describeInstances({ filters: [{ Name: "vpc-id", Values: ["x"] }] as any }),
      "filters",
      /must be an object.*got an array/,
    );
    await refused(c.describeSecurityGroups({ tags: { zone: [] } }), "tag:zone", /tag selector/);
    // A query field the action does not have would be dropped: it is refused too.
    await assert.rejects(
      // deno-lint-ignore no-explicit-any
      c.describeSubnets({ Filters: [{ Name: "vpc-id", Values: ["x"] }] } as any),
      (e: unknown) =>
        e instanceof Ec2Error && e.code === "InvalidInput" &&
        /unknown query field 'Filters'/.test(e.message),
    );
    assert.equal(c.metrics.calls.size, 0, "no request was sent");
  });

  t("every filter name the client may send is taken by EC2", async (target) => {
    // One request per name; a value that matches nothing keeps the answers small.
    const c = targetClient(target, { maxAttempts: 1 });
    try {
      const describe: Record<FilteredAction, (f: Record<string, string[]>) => Promise<unknown>> = {
        DescribeNetworkInterfaces: (filters) => c.describeNetworkInterfaces({ filters }),
        DescribeSubnets: (filters) => c.describeSubnets({ filters }),
        DescribeInstances: (filters) => c.describeInstances({ filters }),
        DescribeVpcs: (filters) => c.describeVpcs({ filters }),
        DescribeSecurityGroups: (filters) => c.describeSecurityGroups({ filters }),
      };
      const names = Object.entries(FILTER_NAMES) as [FilteredAction, ReadonlySet<string>][];
      let taken = 0;
      for (const [action, set] of names) {
        for (const filter of [...set, "tag:vpcni-zone", "tag-key", "tag-value"]) {
          const answer = describe[action]({ [filter]: ["no-such-value"] });
          if (fails500(target, action, filter)) {
            await assert.rejects(
              answer,
              (e: unknown) => e instanceof Ec2Error && e.httpStatus === 500,
              `${action} ${filter}: listed as answering 500`,
            );
          } else {
            await answer.catch((e) => assert.fail(`${action} ${filter}: ${e}`));
            taken++;
          }
        }
      }
      assert.ok(taken > 0);
    } finally {
      c.close();
    }
    // Sent as it is, a name EC2 does not know is EC2's InvalidParameterValue.
    for (const action of Object.keys(FILTER_NAMES) as FilteredAction[]) {
      const e = await rawFailure(
        target,
        rawDescribe(action, [{ Name: "no-such-filter", Values: ["x"] }]),
      );
      assert.ok(e, `${action}: an unknown filter name was accepted`);
      if (has(target, "unknownFilter500")) assert.equal(e.$metadata?.httpStatusCode, 500);
      else {
        assert.equal(e.name, "InvalidParameterValue", action);
        assert.equal(e.message, "The filter 'no-such-filter' is invalid");
        assert.equal(e.$metadata?.httpStatusCode, 400);
      }
    }
  });
}
