import assert from "node:assert/strict";
import type { SubnetInfo } from "./cloud.ts";
import { SubnetCache } from "./subnet_cache.ts";

const subnet = (availableIps: number): SubnetInfo => ({
  id: "subnet-1",
  cidr: "10.0.0.0/24",
  az: "us-east-1a",
  availableIps,
  tags: {},
});

Deno.test("SubnetCache describes again only when stale, once for concurrent callers, in place", async () => {
  let clock = 0;
  let calls = 0;
  let answer: () => Promise<SubnetInfo[]> = () => Promise.resolve([subnet(100)]);
  const held = [subnet(250)];
  const cache = new SubnetCache(held, () => clock, () => {
    calls++;
    return answer();
  });

  await cache.refresh(60_000);
  assert.equal(calls, 0, "fresh: no call");
  clock = 61_000;
  await Promise.all([cache.refresh(60_000), cache.refresh(60_000), cache.refresh(60_000)]);
  assert.equal(calls, 1, "three callers, one DescribeSubnets");
  assert.equal(held[0].availableIps, 100, "the array growth holds is updated in place");

  // A failed refresh keeps the last answer, and the next caller tries again.
  clock = 200_000;
  answer = () => Promise.reject(new Error("RequestLimitExceeded"));
  await cache.refresh(60_000);
  assert.equal(held[0].availableIps, 100);
  answer = () => Promise.resolve([subnet(7)]);
  await cache.refresh(60_000);
  assert.equal(calls, 3);
  assert.equal(held[0].availableIps, 7);
});
