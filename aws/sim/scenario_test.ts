import assert from "node:assert/strict";
import { parseScenario, ScenarioError } from "./scenario.ts";

const GOOD = `region: us-east-1
vpc:
  id: vpc-0abc
  cidrs: [10.0.0.0/16]
subnets:
  - id: subnet-0a
    cidr: 10.0.0.0/24
    az: us-east-1a
    tags: { zone: public }
securityGroups:
  - id: sg-0a
    name: default
instances:
  - id: i-0a
    type: m5.large
    subnet: subnet-0a
    securityGroups: [sg-0a]
`;

function issuesOf(text: string): ScenarioError {
  try {
    parseScenario(text, "s.yaml");
  } catch (e) {
    assert.ok(e instanceof ScenarioError, `expected a ScenarioError, got ${e}`);
    return e;
  }
  throw new Error("expected the scenario to be refused");
}

Deno.test("a good scenario parses with defaults filled in", () => {
  const s = parseScenario(GOOD);
  assert.equal(s.accountId, "123456789012");
  assert.deepEqual(s.subnets[0].tags, { zone: "public" });
  assert.deepEqual(s.instances[0].tags, {});
  assert.deepEqual(s.faults, {});
});

Deno.test("JSON scenarios parse too", () => {
  const s = parseScenario(JSON.stringify(parseScenario(GOOD)), "s.json");
  assert.equal(s.instances[0].id, "i-0a");
});

Deno.test("a bad field is reported with its line and path", () => {
  const e = issuesOf(GOOD.replace("cidr: 10.0.0.0/24", "cidr: 10.0.0.1/24"));
  assert.equal(e.issues.length, 1);
  assert.equal(e.issues[0].field, "subnets[0].cidr");
  assert.equal(e.issues[0].line, 7);
  assert.match(e.message, /s\.yaml:7:11: subnets\[0\]\.cidr: must be an IPv4 CIDR/);
});

Deno.test("a missing field is reported at its parent's line", () => {
  const e = issuesOf(GOOD.replace("    az: us-east-1a\n", ""));
  assert.equal(e.issues[0].field, "subnets[0].az");
  assert.equal(e.issues[0].line, 6);
});

Deno.test("unknown keys, bad references and bad types are all reported", () => {
  const text = GOOD
    .replace("subnet: subnet-0a", "subnet: subnet-0zz")
    .replace("securityGroups: [sg-0a]", "securityGroups: [sg-0nope]")
    .replace("type: m5.large", "type: m5.enormous");
  const e = issuesOf(text);
  const byField = Object.fromEntries(e.issues.map((i) => [i.field, i]));
  assert.match(byField["instances[0].subnet"].message, /unknown subnet subnet-0zz/);
  assert.equal(byField["instances[0].subnet"].line, 16);
  assert.match(byField["instances[0].securityGroups[0]"].message, /unknown security group/);
  assert.match(byField["instances[0].type"].message, /unknown instance type m5.enormous/);
  const typo = issuesOf(GOOD.replace("region: us-east-1", "region: us-east-1\nregoin: x"));
  assert.match(typo.message, /regoin|Unrecognized key/i);
});

Deno.test("subnets outside the VPC or overlapping each other are refused", () => {
  const text = GOOD.replace(
    "securityGroups:\n  - id: sg-0a",
    "  - id: subnet-0b\n    cidr: 10.0.0.128/25\n    az: us-east-1a\n  - id: subnet-0c\n    cidr: 192.168.0.0/24\n    az: us-east-1a\nsecurityGroups:\n  - id: sg-0a",
  );
  const e = issuesOf(text);
  const messages = e.issues.map((i) => `${i.field}: ${i.message}`).join("\n");
  assert.match(messages, /subnets\[1\]\.cidr: overlaps subnets\[0\]/);
  assert.match(messages, /subnets\[2\]\.cidr: 192\.168\.0\.0\/24 is not inside the VPC/);
});

Deno.test("YAML syntax errors carry a line", () => {
  const e = issuesOf("region: us-east-1\nvpc: [unclosed\n");
  assert.ok(e.issues[0].line !== undefined && e.issues[0].line >= 2);
});
