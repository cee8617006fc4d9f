/**
 * The fuzz test's invalid mutations of the CNI_* variables (tests/cni/fuzz_mutations.ts
 * holds those of the network configuration).
 *
 * @module
 */
import type { FuzzWorld } from "./fuzz_cases.ts";
import { ALL, long, type Mutation, POD, setEnv } from "./fuzz_mutations.ts";

/** Invalid values of every CNI_* variable, with the codes they may cause. */
export function envMutations(w: FuzzWorld): Mutation[] {
  const f = w.files;
  return [
    {
      name: "CNI_COMMAND",
      verbs: ALL,
      codes: [4],
      apply: setEnv("CNI_COMMAND", [undefined, "", "add", "ATTACH", "ADD ", "DEL\0", long(300)]),
    },
    {
      name: "CNI_CONTAINERID",
      verbs: POD,
      codes: [4],
      apply: setEnv("CNI_CONTAINERID", [
        undefined,
        "-x",
        "a b",
        "a/b",
        "../../etc",
        "é",
        long(257),
        "x\ny",
        "x\0y",
        ".hidden",
      ]),
    },
    {
      name: "CNI_IFNAME",
      verbs: POD,
      codes: [4],
      apply: setEnv("CNI_IFNAME", [
        undefined,
        "lo",
        "all",
        "default",
        ".",
        "..",
        "eth%d",
        "%s",
        "a/b",
        "eth0:1",
        "e th0",
        "\t",
        "eth\0",
        long(16),
        "ethé",
        "bonding_masters",
        "eth0\n",
        "\u200beth0",
      ]),
    },
    {
      name: "CNI_NETNS that is not a pod's netns",
      verbs: POD,
      codes: [4],
      apply: setEnv("CNI_NETNS", [
        w.nodeNetns,
        "/proc/self/ns/net",
        "/proc/thread-self/ns/net",
        "/proc/1/ns/net",
        f.fifo,
        f.regular,
        "/dev/null",
        f.dir,
        f.socket,
        "/proc/self/ns/mnt",
        "/proc/self/ns/uts",
        "/proc/self/ns/user",
        "run/netns/x",
        `/${long(5000, "n")}`,
      ]),
    },
    {
      name: "CNI_NETNS unset or missing",
      verbs: ["ADD", "CHECK"],
      codes: [3, 4],
      apply: setEnv("CNI_NETNS", [undefined, "/run/netns/vpcni-fuzz-gone", `${f.regular}/x`]),
    },
    {
      name: "CNI_ARGS",
      verbs: ALL,
      codes: [4],
      apply: setEnv("CNI_ARGS", [
        "K8S_POD_NAME",
        "=x",
        "FOO=bar",
        "IgnoreUnknown=maybe;FOO=1",
        `K8S_POD_NAME=${long(20_000)}`,
        Array(65).fill("IgnoreUnknown=1").join(";"),
        `K8S_POD_NAME=${long(2000)}`,
        "K8S_POD_NAME=a\x1b[2J",
      ]),
    },
    {
      name: "CNI_PATH",
      verbs: ALL,
      codes: [4],
      apply: setEnv("CNI_PATH", [
        Array(65).fill("/opt/cni/bin").join(":"),
        `/${long(70_000, "p")}`,
        "/opt/cni/bin\0",
      ]),
    },
    { name: "CNI_PATH unset", verbs: ["GC"], codes: [4], apply: setEnv("CNI_PATH", [undefined]) },
  ];
}
