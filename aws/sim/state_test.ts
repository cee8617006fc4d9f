import assert from "node:assert/strict";
import { SimState } from "./state.ts";
import { checkScenario } from "./scenario.ts";
import { defaultFaults } from "./faults.ts";
import { SimError } from "./errors.ts";

function world(): SimState {
  return new SimState(
    checkScenario({
      region: "us-east-1",
      vpc: { id: "vpc-1", cidrs: ["10.0.0.0/16"] },
      subnets: [
        { id: "subnet-a", cidr: "10.0.0.0/24", az: "us-east-1a" },
        { id: "subnet-t", cidr: "10.0.1.0/28", az: "us-east-1a" },
      ],
      instances: [{ id: "i-1", type: "m5.large", subnet: "subnet-a", primaryIp: "10.0.0.4" }],
    }),
    defaultFaults(),
  );
}

const code = (c: string) => (e: unknown) => e instanceof SimError && e.code === c;

Deno.test("an explicit primary IP is honoured and picks skip it; freed addresses are not reused at once", () => {
  const s = world();
  const a = s.createNetworkInterface({ subnetId: "subnet-a" });
  assert.equal(a.privateIps[0].address, "10.0.0.5");
  s.deleteNetworkInterface(a.id);
  const b = s.createNetworkInterface({ subnetId: "subnet-a" });
  assert.equal(b.privateIps[0].address, "10.0.0.6");
});

Deno.test("prefixes are aligned /28s that avoid the reserved addresses", () => {
  const s = world();
  const e = s.createNetworkInterface({ subnetId: "subnet-a" });
  const { prefixes } = s.assignPrivateIps(e.id, { prefixCount: 2 });
  assert.deepEqual(prefixes, ["10.0.0.16/28", "10.0.0.32/28"]);
  const ips = s.assignPrivateIps(e.id, { count: 12 }).ips;
  assert.ok(
    ips.every((ip) => Number(ip.split(".")[3]) < 16 || Number(ip.split(".")[3]) >= 48),
    ips.join(),
  );
  assert.throws(
    () => s.assignPrivateIps(e.id, { prefixes: ["10.0.0.40/28"] }),
    code("InvalidParameterValue"),
  );
});

Deno.test("a failed call changes nothing", () => {
  const s = world();
  const used = s.subnets.get("subnet-t")!.used.size;
  const enis = s.enis.size;
  assert.throws(
    () => s.createNetworkInterface({ subnetId: "subnet-t", secondaryCount: 11 }),
    code("InsufficientFreeAddressesInSubnet"),
  );
  assert.throws(
    () => s.createNetworkInterface({ subnetId: "subnet-t", prefixCount: 1 }),
    code("InsufficientCidrBlocks"),
  );
  assert.equal(s.subnets.get("subnet-t")!.used.size, used);
  assert.equal(s.enis.size, enis);
});

Deno.test("AllowReassignment moves a secondary IP between ENIs; without it the IP is in use", () => {
  const s = world();
  const a = s.createNetworkInterface({ subnetId: "subnet-a" });
  const b = s.createNetworkInterface({ subnetId: "subnet-a" });
  const [ip] = s.assignPrivateIps(a.id, { count: 1 }).ips;
  assert.throws(() => s.assignPrivateIps(b.id, { ips: [ip] }), code("InvalidIPAddress.InUse"));
  s.assignPrivateIps(b.id, { ips: [ip], allowReassignment: true });
  assert.ok(!a.privateIps.some((x) => x.address === ip));
  assert.ok(b.privateIps.some((x) => x.address === ip));
  const primaryOfA = a.privateIps[0].address;
  assert.throws(
    () => s.assignPrivateIps(b.id, { ips: [primaryOfA], allowReassignment: true }),
    code("InvalidIPAddress.InUse"),
  );
});

Deno.test("attach with a delay emits attach, then attached; detach emits detach, then detached", async () => {
  const s = world();
  s.faults.attachDelayMs = 20;
  const events: string[] = [];
  s.onChange((e) => events.push(e.kind));
  const e = s.createNetworkInterface({ subnetId: "subnet-a" });
  const att = s.attachNetworkInterface(e.id, "i-1", 1);
  assert.equal(att.status, "attaching");
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(att.status, "attached");
  s.detachNetworkInterface(att.id);
  assert.throws(() => s.deleteNetworkInterface(e.id), code("InvalidNetworkInterface.InUse"));
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(e.attachment, undefined);
  s.deleteNetworkInterface(e.id);
  assert.deepEqual(events, ["create", "attach", "attached", "detach", "detached", "delete"]);
  s.close();
});

Deno.test("a launch can give the primary ENI secondary IPs or prefixes, within the type's limits", () => {
  const launched = (extra: Record<string, number>, type = "m5.large") =>
    new SimState(
      checkScenario({
        region: "us-east-1",
        vpc: { id: "vpc-1", cidrs: ["10.0.0.0/16"] },
        subnets: [{ id: "subnet-a", cidr: "10.0.0.0/24", az: "us-east-1a" }],
        instances: [{ id: "i-1", type, subnet: "subnet-a", ...extra }],
      }),
      defaultFaults(),
    );
  const primary = (s: SimState) => s.enisOf("i-1")[0];
  const ips = primary(launched({ secondaryIps: 9 })).privateIps;
  assert.equal(ips.length, 10);
  assert.equal(ips.filter((x) => x.primary).length, 1);
  assert.ok(ips.every((x) => x.assignedAt === 0), "settled, as the launch was long ago");
  assert.equal(primary(launched({ prefixes: 2 })).prefixes.length, 2);
  // m5.large takes 10 addresses per ENI; a Xen type takes no prefix; not both at once.
  assert.throws(() => launched({ secondaryIps: 10 }), /instances\[0\]\.secondaryIps/);
  assert.throws(() => launched({ prefixes: 1 }, "m4.large"), /instances\[0\]\.prefixes.*Prefix/);
  assert.throws(() => launched({ secondaryIps: 1, prefixes: 1 }), /InvalidParameterCombination/);
});
