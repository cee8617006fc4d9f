/**
 * Checks of the services an ADD depends on: the daemon, IMDS, EC2 permissions, the
 * instance's limits against kubelet's max pods, and EC2 throttling. Each returns one
 * {@linkcode CheckResult} with the fix an on-call engineer can apply.
 *
 * @module
 */
import { embeddedLimits, maxPods } from "../aws/limits.ts";
import type { CheckResult } from "./report.ts";
import type { Facts } from "./facts.ts";
import type { PermissionProbe } from "./cloud.ts";

const SERVE_FIX = "start the daemon (systemctl start vpcni, or see " +
  "`kubectl -n kube-system logs ds/vpcni`); pods cannot get addresses until it answers";

/** Daemon reachable, healthy and ready. */
export function checkDaemon(f: Facts, url: string): CheckResult {
  const base = { id: "daemon", title: "daemon" };
  if (!f.daemon.reachable) {
    return { ...base, status: "fail", found: `not reachable (${f.daemon.detail})`, fix: SERVE_FIX };
  }
  if (!f.daemon.healthy) {
    return {
      ...base,
      status: "fail",
      found: `unhealthy at ${url} (${f.daemon.detail})`,
      fix: "restart the daemon and read its last log lines (vpcni doctor bundle collects them)",
    };
  }
  if (!f.daemon.ready) {
    return {
      ...base,
      status: "warn",
      found: `healthy but not ready yet (${f.daemon.detail})`,
      fix: "wait for the start-up reconcile; if it stays so, check IMDS and EC2 below",
    };
  }
  return { ...base, status: "ok", found: `healthy and ready at ${url}` };
}

/** IMDSv2 answers. */
export function checkImds(f: Facts): CheckResult {
  const base = { id: "imds", title: "IMDSv2" };
  if (!f.metadata) {
    return {
      ...base,
      status: "fail",
      found: `unreachable: ${f.imdsError ?? "no answer"}`,
      fix: "enable IMDSv2 on the instance (HttpEndpoint=enabled, HttpTokens=required) and, " +
        "for containers, HttpPutResponseHopLimit >= 2; make sure nothing blocks 169.254.169.254",
    };
  }
  const m = f.metadata;
  return {
    ...base,
    status: "ok",
    found: `${m.instanceId} ${m.instanceType} in ${m.az}, ${m.enis.length} ENIs attached`,
  };
}

/** EC2 permissions, from DryRun probes. */
export function checkPermissions(probes: PermissionProbe[] | string): CheckResult {
  const base = { id: "ec2-permissions", title: "EC2 permissions" };
  if (typeof probes === "string") {
    return {
      ...base,
      status: "fail",
      found: probes,
      fix: "give the node credentials (instance profile with the README's IAM policy) and " +
        "make the EC2 endpoint reachable",
    };
  }
  const denied = probes.filter((p) => p.result === "denied");
  const unknown = probes.filter((p) => p.result === "unknown");
  if (denied.length > 0) {
    return {
      ...base,
      status: "fail",
      found: `denied: ${denied.map((p) => p.action).join(", ")}`,
      details: denied.map((p) => `${p.action}: ${p.detail}`),
      fix: "add these actions to the node's IAM role (README: least-privilege IAM policy)",
    };
  }
  if (unknown.length > 0) {
    return {
      ...base,
      status: "warn",
      found: `${probes.length - unknown.length} allowed, ${unknown.length} could not be told`,
      details: unknown.map((p) => `${p.action}: ${p.detail}`),
      fix: "check EC2 reachability and credentials; the errors above say what EC2 answered",
    };
  }
  return {
    ...base,
    status: "ok",
    found: `DryRun allowed: ${
      probes.map((p) => p.action.replace(/^Describe/, "Describe ")).length
    } actions`,
  };
}

/** Kubelet's max pods against what the instance's addresses allow. */
export function checkLimits(
  f: Facts,
  kubeletMaxPods: number | undefined,
  where: string,
): CheckResult {
  const base = { id: "limits", title: "max pods" };
  const type = f.metadata?.instanceType;
  if (!type) return { ...base, status: "skip", found: "instance type unknown (IMDS unreachable)" };
  const l = embeddedLimits(type);
  if (!l) {
    return {
      ...base,
      status: "warn",
      found: `${type} is not in the embedded limits table`,
      fix: "run vpcni doctor limits on a newer vpcni",
    };
  }
  const pools = f.config.pools;
  const pd = pools.length > 0 && pools.every((p) => p.prefixDelegation);
  const excludePrimary = pools.length > 0 && pools.every((p) => p.firstInterfaceIndex >= 1);
  const poolMax = pools.map((p) => p.maxEnis).filter((n): n is number => n !== undefined);
  const maxEnis = poolMax.length === pools.length && poolMax.length > 0
    ? Math.min(l.maxEnis, poolMax.reduce((a, b) => a + b, 0) + (excludePrimary ? 1 : 0))
    : undefined;
  const capacity = maxPods(l, { prefixDelegation: pd, excludePrimaryEni: excludePrimary, maxEnis });
  const cmd = `vpcni doctor maxpods --instance-type ${type}${pd ? " --prefix-delegation" : ""}${
    excludePrimary ? " --exclude-primary-eni" : ""
  }${maxEnis !== undefined ? ` --max-enis ${maxEnis}` : ""}`;
  if (kubeletMaxPods === undefined) {
    return {
      ...base,
      status: "warn",
      found:
        `addresses allow ${capacity} pods on ${type}; kubelet's --max-pods not found (${where})`,
      fix: `pass --kubelet-max-pods N to compare; kubelet should use ${capacity} (${cmd})`,
    };
  }
  if (kubeletMaxPods > capacity) {
    return {
      ...base,
      status: "fail",
      found: `kubelet --max-pods=${kubeletMaxPods} but ${type} addresses allow ${capacity}: ` +
        `pods beyond ${capacity} stay in ContainerCreating`,
      fix: `set kubelet --max-pods=${capacity} (${cmd}), or enable prefix delegation`,
    };
  }
  return {
    ...base,
    status: "ok",
    found: `kubelet --max-pods=${kubeletMaxPods} ≤ ${capacity} addresses on ${type}`,
  };
}

/** Throttling seen by the daemon, with the clock offset against EC2. */
export function checkThrottling(f: Facts, offsetSeconds: number | undefined): CheckResult {
  const base = { id: "throttling", title: "EC2 throttling" };
  const metric = (name: string) => {
    let sum = 0;
    for (const line of (f.metrics ?? "").split("\n")) {
      if (line.startsWith(name)) sum += Number(line.slice(line.lastIndexOf(" ") + 1)) || 0;
    }
    return sum;
  };
  const throttles = metric("vpcni_ec2_throttles_total");
  const calls = metric("vpcni_ec2_calls_total");
  const skew = offsetSeconds !== undefined && Math.abs(offsetSeconds) > 60;
  const skewText = offsetSeconds === undefined
    ? "clock offset unknown"
    : `clock ${offsetSeconds}s off EC2`;
  if (skew && Math.abs(offsetSeconds!) > 300) {
    return {
      ...base,
      status: "fail",
      found: `${skewText}: EC2 rejects signatures more than 5 minutes off`,
      fix: "fix time sync (chronyd with the Amazon Time Sync Service, 169.254.169.123)",
    };
  }
  if (throttles > 0 || skew) {
    return {
      ...base,
      status: "warn",
      found: `${throttles} throttled of ${calls} EC2 calls; ${skewText}`,
      fix: "throttling is per account and region: other tools share the budget. Lower warm " +
        "targets churn (pools[].warmIps/warmEnis, releaseDelaySeconds), check time sync, and " +
        "look for other heavy EC2 callers in CloudTrail",
    };
  }
  return {
    ...base,
    status: f.metrics === undefined ? "skip" : "ok",
    found: f.metrics === undefined
      ? `no metrics (daemon down); ${skewText}`
      : `no throttling in ${calls} EC2 calls; ${skewText}`,
  };
}
