import assert from "node:assert/strict";
import {
  matchSubnets,
  pickSubnet,
  podAddresses,
  prefixAddresses,
  subnetGateway,
} from "./subnets.ts";
import { parseSelector } from "./selector.ts";
import type { SubnetInfo } from "./cloud.ts";

const subnets: SubnetInfo[] = [
  {
    id: "subnet-a",
    cidr: "10.0.0.0/24",
    az: "us-east-1a",
    availableIps: 100,
    tags: { zone: "node" },
  },
  {
    id: "subnet-b",
    cidr: "10.0.1.0/24",
    az: "us-east-1a",
    availableIps: 300,
    tags: { zone: "internal" },
  },
  {
    id: "subnet-c",
    cidr: "10.0.2.0/24",
    az: "us-east-1a",
    availableIps: 0,
    tags: { zone: "internal" },
  },
  {
    id: "subnet-d",
    cidr: "10.0.3.0/24",
    az: "us-east-1b",
    availableIps: 250,
    tags: { zone: "internal" },
  },
];
const node = { az: "us-east-1a", primarySubnetId: "subnet-a" };

Deno.test("subnets: selectors stay inside the node's AZ", () => {
  assert.deepEqual(matchSubnets({ kind: "node" }, subnets, node).map((s) => s.id), ["subnet-a"]);
  const tagged = matchSubnets(
    { kind: "tags", selector: parseSelector("zone=internal") },
    subnets,
    node,
  );
  assert.deepEqual(tagged.map((s) => s.id), ["subnet-b", "subnet-c"]);
  assert.deepEqual(
    matchSubnets({ kind: "ids", ids: ["subnet-d", "subnet-b"] }, subnets, node).map((s) => s.id),
    ["subnet-b"],
  );
});

Deno.test("subnets: pick is weighted by free addresses and skips full ones", () => {
  const counts = new Map<string, number>();
  let seed = 1;
  const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  for (let i = 0; i < 4000; i++) {
    const s = pickSubnet(subnets.slice(0, 3), { minFree: 2, random })!;
    counts.set(s.id, (counts.get(s.id) ?? 0) + 1);
  }
  assert.equal(counts.get("subnet-c"), undefined, "a full subnet is never picked");
  const ratio = counts.get("subnet-b")! / counts.get("subnet-a")!;
  assert.ok(ratio > 2.5 && ratio < 3.5, `b has 3x the room of a; picked ${ratio.toFixed(2)}x`);
  assert.equal(pickSubnet([subnets[2]], { minFree: 2 }), undefined);
  assert.equal(
    pickSubnet(subnets, { minFree: 2, exclude: new Set(["subnet-a", "subnet-b", "subnet-d"]) }),
    undefined,
  );
});

Deno.test("subnets: gateway and prefix arithmetic", () => {
  assert.equal(subnetGateway("10.0.1.0/24"), "10.0.1.1");
  assert.equal(subnetGateway("192.168.64.0/18"), "192.168.64.1");
  const p = prefixAddresses("10.0.1.32/28");
  assert.equal(p.length, 16);
  assert.equal(p[0], "10.0.1.32");
  assert.equal(p[15], "10.0.1.47");
});

Deno.test("podAddresses: the secondary IPs and every address of each /28", () => {
  const ips = podAddresses(["10.0.0.5", "10.0.0.6"], ["10.0.1.16/28"]);
  assert.equal(ips.size, 18);
  assert.ok(ips.has("10.0.0.6") && ips.has("10.0.1.16") && ips.has("10.0.1.31"));
  assert.ok(!ips.has("10.0.1.32"));
});
