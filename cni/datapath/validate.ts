/**
 * Refuses bad datapath input before anything is changed, naming the field and what is
 * allowed. Small hand-written checks: the plugin's hot path takes no npm import.
 *
 * @module
 */
import { DatapathInputError } from "./errors.ts";
import { cidrContains, isIpv4, parseIpv4, parseIpv4Cidr } from "../../base/ipv4.ts";
import { MAX_IFNAME_BYTES } from "./naming.ts";
import {
  DATAPATH_KINDS,
  type DatapathConfig,
  type PodAddress,
  type PodAttachment,
  type PodDetachment,
} from "./types.ts";

function fail(msg: string): never {
  throw new DatapathInputError(msg);
}

/** Refuses a name the kernel would refuse (dev_valid_name). */
export function checkIfName(name: unknown, field: string): string {
  if (typeof name !== "string" || name === "") fail(`${field} must be a non-empty string`);
  const bytes = new TextEncoder().encode(name).length;
  if (bytes > MAX_IFNAME_BYTES) {
    fail(`${field} ${JSON.stringify(name)} is ${bytes} bytes; at most ${MAX_IFNAME_BYTES}`);
  }
  if (name === "." || name === ".." || /[/:\s\0]/.test(name)) {
    fail(`${field} ${JSON.stringify(name)} is not a valid interface name`);
  }
  return name;
}

/** Refuses a container id CNI would refuse: alphanumerics, `_`, `.`, `-`, starting alnum. */
export function checkContainerId(id: unknown): string {
  if (typeof id !== "string" || !/^[A-Za-z0-9][A-Za-z0-9_.\-]*$/.test(id)) {
    fail(`containerId ${JSON.stringify(id)} must be alphanumeric plus '_', '.', '-'`);
  }
  return id;
}

/** Checks a {@linkcode DatapathConfig}; returns it unchanged. */
export function validateConfig(cfg: DatapathConfig): DatapathConfig {
  if (!DATAPATH_KINDS.includes(cfg?.kind)) {
    fail(
      `datapath ${JSON.stringify(cfg?.kind)} is unknown; use one of ${DATAPATH_KINDS.join(", ")}`,
    );
  }
  if (!Number.isInteger(cfg.mtu) || cfg.mtu < 576 || cfg.mtu > 9001) {
    fail(`mtu must be an integer in 576..9001, got ${String(cfg.mtu)}`);
  }
  if (!Array.isArray(cfg.serviceCidrs)) fail("serviceCidrs must be a list of IPv4 CIDRs");
  for (const c of cfg.serviceCidrs) {
    if (typeof c !== "string" || !c.includes("/") || !parseIpv4Cidr(c)) {
      fail(`serviceCidrs entry ${JSON.stringify(c)} is not an IPv4 CIDR like 10.96.0.0/12`);
    }
  }
  if (!Array.isArray(cfg.nodeIps)) fail("nodeIps must be a list of IPv4 addresses");
  for (const ip of cfg.nodeIps) {
    if (typeof ip !== "string" || !isIpv4(ip)) {
      fail(`nodeIps entry ${JSON.stringify(ip)} is not an IPv4 address`);
    }
  }
  if (typeof cfg.hostVethPrefix !== "string" || !/^[a-z0-9]{1,4}$/.test(cfg.hostVethPrefix)) {
    fail(
      `hostVethPrefix ${
        JSON.stringify(cfg.hostVethPrefix)
      } must be 1-4 lower-case letters or digits`,
    );
  }
  return cfg;
}

/** Checks a {@linkcode PodAddress}; returns it unchanged. */
export function validateAddress(a: PodAddress): PodAddress {
  if (!a || typeof a.ip !== "string" || !isIpv4(a.ip)) {
    fail(`address.ip ${JSON.stringify(a?.ip)} is not an IPv4 address`);
  }
  if (!Number.isInteger(a.prefixLen) || a.prefixLen < 1 || a.prefixLen > 32) {
    fail(`address.prefixLen must be an integer in 1..32, got ${String(a.prefixLen)}`);
  }
  if (typeof a.gateway !== "string" || !isIpv4(a.gateway)) {
    fail(`address.gateway ${JSON.stringify(a.gateway)} is not an IPv4 address`);
  }
  if (a.gateway === a.ip) fail(`address.gateway ${a.gateway} equals the pod address`);
  if (a.master !== undefined) checkIfName(a.master, "address.master");
  const e = a.eni;
  if (e !== undefined) {
    if (typeof e.mac !== "string" || !/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/.test(e.mac)) {
      fail(`address.eni.mac ${JSON.stringify(e.mac)} must be a lower-case aa:bb:cc:dd:ee:ff MAC`);
    }
    if (!Number.isInteger(e.deviceIndex) || e.deviceIndex < 0 || e.deviceIndex > 127) {
      fail(`address.eni.deviceIndex must be an integer in 0..127, got ${String(e.deviceIndex)}`);
    }
    const subnet = typeof e.subnetCidr === "string" ? parseIpv4Cidr(e.subnetCidr) : undefined;
    if (!subnet || !e.subnetCidr.includes("/")) {
      fail(`address.eni.subnetCidr ${JSON.stringify(e.subnetCidr)} is not an IPv4 CIDR`);
    }
    if (typeof e.gateway !== "string" || !isIpv4(e.gateway)) {
      fail(`address.eni.gateway ${JSON.stringify(e.gateway)} is not an IPv4 address`);
    }
    if (
      e.primaryIp !== undefined &&
      (!isIpv4(e.primaryIp) || !cidrContains(subnet, parseIpv4(e.primaryIp)!))
    ) {
      fail(
        `address.eni.primaryIp ${JSON.stringify(e.primaryIp)} is not an address of ${e.subnetCidr}`,
      );
    }
    if (!cidrContains(subnet, parseIpv4(a.ip)!)) {
      fail(`address.ip ${a.ip} is outside the ENI's subnet ${e.subnetCidr}`);
    }
    // The primary ENI routes through main: its routeTable is ignored, so any value is fine.
    if (!e.primary && e.routeTable !== undefined && e.routeTable !== 0) {
      const t = e.routeTable;
      if (!Number.isInteger(t) || t < 1 || t > 0xfffffffe || t === 253 || t === 254 || t === 255) {
        fail(`address.eni.routeTable ${String(t)} must be an unreserved table id (not 253-255)`);
      }
    }
  }
  return a;
}

/** Checks a {@linkcode PodAttachment} for ADD or CHECK; returns it unchanged. */
export function validateAttachment(pod: PodAttachment): PodAttachment {
  checkContainerId(pod?.containerId);
  checkIfName(pod.ifName, "ifName");
  if (typeof pod.netns !== "string" || !pod.netns.startsWith("/")) {
    fail(`netns ${JSON.stringify(pod.netns)} must be an absolute path`);
  }
  validateAddress(pod.address);
  return pod;
}

/** Checks a {@linkcode PodDetachment} for DEL; returns it unchanged. */
export function validateDetachment(pod: PodDetachment): PodDetachment {
  checkContainerId(pod?.containerId);
  checkIfName(pod.ifName, "ifName");
  if (pod.netns !== undefined && pod.netns !== "" && !pod.netns.startsWith("/")) {
    fail(`netns ${JSON.stringify(pod.netns)} must be an absolute path`);
  }
  if (pod.address !== undefined) validateAddress(pod.address);
  return pod;
}
