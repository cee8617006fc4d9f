import assert from "node:assert/strict";
import { ifNameProblem, parseCniArgs, parseCniEnv, parseCommand } from "./env.ts";
import { CniError } from "./errors.ts";

function envOf(vars: Record<string, string>) {
  return (name: string) => vars[name];
}

function assertCode4(fn: () => unknown, re: RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof CniError);
    assert.equal(e.code, 4);
    assert.match(e.message, re);
    return true;
  });
}

Deno.test("CNI_ARGS: the kubelet keys are read", () => {
  assert.deepEqual(
    parseCniArgs(
      "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web-0;K8S_POD_UID=u-1;K8S_POD_INFRA_CONTAINER_ID=abc",
    ),
    {
      ignoreUnknown: true,
      podNamespace: "ns",
      podName: "web-0",
      podUid: "u-1",
      podInfraContainerId: "abc",
    },
  );
});

Deno.test("CNI_ARGS: unknown keys fail unless IgnoreUnknown is 1 or true", () => {
  assertCode4(() => parseCniArgs("FOO=bar"), /unknown key "FOO"/);
  assertCode4(() => parseCniArgs("IgnoreUnknown=0;FOO=bar"), /unknown key "FOO"/);
  assert.equal(parseCniArgs("FOO=bar;IgnoreUnknown=true").ignoreUnknown, true);
  assert.equal(parseCniArgs("IgnoreUnknown=TRUE;FOO=1").ignoreUnknown, true);
});

Deno.test("CNI_ARGS: malformed pairs and IgnoreUnknown values are named", () => {
  assertCode4(() => parseCniArgs("K8S_POD_NAME"), /malformed pair "K8S_POD_NAME"/);
  assertCode4(() => parseCniArgs("=x"), /malformed pair/);
  assertCode4(() => parseCniArgs("IgnoreUnknown=maybe"), /IgnoreUnknown=maybe/);
});

Deno.test("interface names follow the spec's rules", () => {
  for (const good of ["eth0", "net1", "eth1", "a23456789012345", "pod-eth_0.1", "LO", "lo0"]) {
    assert.equal(ifNameProblem(good), undefined, good);
  }
  for (const bad of ["", ".", "..", "a234567890123456", "et/h0", "eth:0", "eth 0"]) {
    assert.ok(ifNameProblem(bad), `expected ${JSON.stringify(bad)} to be refused`);
  }
});

Deno.test("interface names the kernel treats specially are refused with code 4", () => {
  const base = { CNI_CONTAINERID: "c1", CNI_NETNS: "/run/netns/x" };
  const bad: [string, RegExp][] = [
    ["lo", /reserves/],
    ["all", /reserves/],
    ["default", /reserves/],
    ["bonding_masters", /reserves/],
    ["eth%d", /'%'/],
    ["%s", /'%'/],
    ["e%", /'%'/],
    ["eth\0", /printable ASCII/],
    ["eth\x01", /printable ASCII/],
    ["eth\x7f", /printable ASCII/],
    ["ethé", /printable ASCII/],
    ["eth\u00a0", /whitespace|printable/],
    ["\t", /whitespace/],
    ["eth0\n", /whitespace/],
    ["é".repeat(8), /shorter than 16 bytes/],
  ];
  for (const [name, re] of bad) {
    for (const verb of ["ADD", "DEL", "CHECK"] as const) {
      assertCode4(
        () => parseCniEnv(verb, envOf({ ...base, CNI_IFNAME: name })),
        new RegExp(`CNI_IFNAME .*${re.source}`),
      );
    }
  }
  const long = "x".repeat(100_000);
  assert.throws(() => parseCniEnv("ADD", envOf({ ...base, CNI_IFNAME: long })), (e: unknown) => {
    assert.ok(e instanceof CniError && e.message.length < 300, "the message is bounded");
    return true;
  });
});

Deno.test("CNI_CONTAINERID, CNI_ARGS and CNI_PATH are bounded", () => {
  const base = { CNI_CONTAINERID: "c1", CNI_NETNS: "/run/netns/x", CNI_IFNAME: "eth0" };
  const at = (over: Record<string, string>) => () =>
    parseCniEnv("ADD", envOf({ ...base, ...over }));
  assert.equal(at({ CNI_CONTAINERID: "a".repeat(256) })().containerId?.length, 256);
  assertCode4(at({ CNI_CONTAINERID: "a".repeat(257) }), /CNI_CONTAINERID is 257 characters/);
  assertCode4(at({ CNI_CONTAINERID: "abc/../x" }), /CNI_CONTAINERID/);
  assertCode4(at({ CNI_CONTAINERID: "ab c" }), /CNI_CONTAINERID/);
  assertCode4(at({ CNI_ARGS: "K8S_POD_NAME=" + "a".repeat(20_000) }), /CNI_ARGS is longer/);
  assertCode4(at({ CNI_ARGS: "K8S_POD_NAME=" + "a".repeat(1025) }), /K8S_POD_NAME longer/);
  assertCode4(at({ CNI_ARGS: Array(65).fill("IgnoreUnknown=1").join(";") }), /more than 64 pairs/);
  assertCode4(at({ CNI_ARGS: "K8S_POD_NAME=a\x1b[2J" }), /control character/);
  assertCode4(at({ CNI_PATH: Array(65).fill("/opt/cni/bin").join(":") }), /65 entries/);
  assertCode4(at({ CNI_PATH: "/" + "b".repeat(70_000) }), /CNI_PATH is longer/);
  assert.equal(
    at({ CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default" })().args
      .podName,
    "web-0",
  );
});

Deno.test("required variables per verb", () => {
  const base = { CNI_CONTAINERID: "c1", CNI_NETNS: "/run/netns/x", CNI_IFNAME: "eth0" };
  assertCode4(
    () => parseCniEnv("ADD", envOf({ ...base, CNI_NETNS: "" })),
    /CNI_NETNS is required for ADD/,
  );
  assertCode4(
    () => parseCniEnv("CHECK", envOf({ CNI_CONTAINERID: "c1", CNI_NETNS: "/x" })),
    /CNI_IFNAME/,
  );
  assert.equal(
    parseCniEnv("DEL", envOf({ CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" })).netns,
    undefined,
  );
  assertCode4(() => parseCniEnv("GC", envOf({})), /CNI_PATH is required for GC/);
  assert.deepEqual(parseCniEnv("GC", envOf({ CNI_PATH: "/a::/b" })).path, ["/a", "/b"]);
  assertCode4(
    () => parseCniEnv("ADD", envOf({ ...base, CNI_CONTAINERID: "-x" })),
    /CNI_CONTAINERID/,
  );
  assertCode4(() => parseCniEnv("ADD", envOf({ ...base, CNI_IFNAME: "bad/name" })), /CNI_IFNAME/);
});

Deno.test("CNI_COMMAND must be a verb", () => {
  assertCode4(() => parseCommand(envOf({})), /CNI_COMMAND is not set/);
  assertCode4(() => parseCommand(envOf({ CNI_COMMAND: "add" })), /not one of/);
  assert.equal(parseCommand(envOf({ CNI_COMMAND: "STATUS" })), "STATUS");
});
