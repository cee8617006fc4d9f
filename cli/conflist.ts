/**
 * The network configuration list `vpcni install` writes: built from flags (taking the
 * datapath and socket from the daemon's config file when one is given), or read from a
 * conflist file the user supplies.
 *
 * Whichever way it comes, the result goes through the plugin's own config parser before
 * anything is written, so a conflist install accepts is one the plugin accepts when the
 * runtime hands it over. Every problem is an {@linkcode InstallError} naming the flag or
 * the file and the field.
 *
 * @module
 */
import { z } from "zod";
import { parse as parseYaml } from "yaml";
import { parseConfig } from "../cni/config.ts";
import { CniError } from "../cni/errors.ts";
import { isSupportedVersion, SUPPORTED_CNI_VERSIONS } from "../cni/versions.ts";

/** The daemon's socket unless configured otherwise (same as proto/ipam.ts). */
export const DEFAULT_SOCKET = "/run/vpcni/ipam.sock";

/** Datapaths the plugin builds (see DESIGN.md). */
export const DATAPATHS = ["ipvlan-l2", "ipvlan-l3s", "veth"] as const;
/** Plugins `--chain` can append after vpcni, with the capabilities they need. */
export const CHAINABLE: Record<string, Record<string, unknown>> = {
  portmap: { type: "portmap", capabilities: { portMappings: true }, snat: true },
  bandwidth: { type: "bandwidth", capabilities: { bandwidth: true } },
  tuning: { type: "tuning" },
};

/** The `install` flags that decide the conflist, as commander hands them over. */
export interface ConflistFlags {
  conflist?: string;
  config?: string;
  networkName: string;
  datapath?: string;
  mtu: string;
  serviceCidr: string[];
  socket?: string;
  hostVethPrefix: string;
  chain?: string;
  cniVersion: string;
}

/** A bad flag or file: the message names it and the fix. Nothing has been written. */
export class InstallError extends Error {
  /** Creates the error; the message names the flag. */
  constructor(message: string) {
    super(message);
    this.name = "InstallError";
  }
}

const ipv4Cidr =
  /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}\/(3[0-2]|[12]?\d)$/;

const conflistSchema = z.object({
  cniVersion: z.string().regex(/^\d+\.\d+\.\d+$/, "must be a version like 1.0.0"),
  name: z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/, "must be a valid network name"),
  plugins: z.array(z.object({ type: z.string().min(1) }).passthrough()).min(1),
}).passthrough();

/** The part of the daemon's config file `install` reads (so plugin and daemon agree). */
const daemonConfigPart = z.object({
  datapath: z.enum(DATAPATHS).optional(),
  socketPath: z.string().startsWith("/").optional(),
}).passthrough();

/** A network configuration list (parsed only as far as `install` needs). */
export type Conflist = z.infer<typeof conflistSchema>;

/** Works out the conflist to install from `--conflist`, or from flags and `--config`. */
export async function resolveConflist(f: ConflistFlags): Promise<Conflist> {
  if (f.conflist !== undefined) {
    return parseConflist(
      await readStructured(f.conflist, "--conflist"),
      `--conflist ${f.conflist}`,
    );
  }
  let daemon: { datapath?: string; socketPath?: string } = {};
  if (f.config !== undefined) {
    const r = daemonConfigPart.safeParse(await readStructured(f.config, "--config"));
    if (!r.success) throw new InstallError(`--config ${f.config}: ${issueText(r.error.issues[0])}`);
    daemon = r.data;
  }
  const conflist = conflistFromFlags(f, daemon);
  checkWithPluginParser(conflist, "the conflist built from the flags");
  return conflist;
}

/** Builds the conflist from flags (and the daemon config's datapath/socket when given). */
export function conflistFromFlags(
  f: ConflistFlags,
  daemon: { datapath?: string; socketPath?: string } = {},
): Conflist {
  const datapath = f.datapath ?? daemon.datapath ?? "ipvlan-l2";
  if (!(DATAPATHS as readonly string[]).includes(datapath)) {
    throw new InstallError(
      `--datapath: "${datapath}" is not one of ${DATAPATHS.join(", ")}`,
    );
  }
  const mtu = Number(f.mtu);
  if (!Number.isInteger(mtu) || mtu < 576 || mtu > 9001) {
    throw new InstallError(
      `--mtu: "${f.mtu}" must be an integer from 576 to 9001 (VPC jumbo frames)`,
    );
  }
  const serviceCidrs = f.serviceCidr.flatMap((s) => s.split(",")).map((s) => s.trim())
    .filter((s) => s !== "");
  for (const c of serviceCidrs) {
    if (!ipv4Cidr.test(c)) {
      throw new InstallError(`--service-cidr: "${c}" is not an IPv4 CIDR such as 10.100.0.0/16`);
    }
  }
  if (!/^[a-z][a-z0-9]{0,3}$/.test(f.hostVethPrefix)) {
    throw new InstallError(
      `--host-veth-prefix: "${f.hostVethPrefix}" must be 1-4 lower-case letters/digits, ` +
        `starting with a letter (the host link name is the prefix + 11 hex chars, ≤ 15 bytes)`,
    );
  }
  const socket = f.socket ?? daemon.socketPath ?? DEFAULT_SOCKET;
  if (!socket.startsWith("/")) {
    throw new InstallError(`--socket: "${socket}" must be an absolute path`);
  }
  if (!isSupportedVersion(f.cniVersion)) {
    throw new InstallError(
      `--cni-version: "${f.cniVersion}" is not a version vpcni speaks; use one of ` +
        `${SUPPORTED_CNI_VERSIONS.join(", ")}, or auto`,
    );
  }
  if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(f.networkName)) {
    throw new InstallError(
      `--network-name: "${f.networkName}" may hold letters, digits, '_', '.', '-' only`,
    );
  }
  const chain = (f.chain ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "");
  for (const c of chain) {
    if (!CHAINABLE[c]) {
      throw new InstallError(
        `--chain: "${c}" is not one of ${Object.keys(CHAINABLE).join(", ")}`,
      );
    }
  }
  const main: Record<string, unknown> = {
    type: "vpcni",
    datapath,
    mtu,
    daemonSocket: socket,
    hostVethPrefix: f.hostVethPrefix,
    capabilities: { "io.kubernetes.cri.pod-annotations": true },
  };
  if (serviceCidrs.length > 0) main.serviceCidrs = serviceCidrs;
  return {
    cniVersion: f.cniVersion,
    name: f.networkName,
    plugins: [
      main as Conflist["plugins"][number],
      ...chain.map((c) => ({ ...CHAINABLE[c] }) as Conflist["plugins"][number]),
    ],
  };
}

/** Checks a conflist's structure; errors name `source` and the field. */
export function parseConflist(raw: unknown, source: string): Conflist {
  const r = conflistSchema.safeParse(raw);
  if (!r.success) {
    throw new InstallError(`${source}: ${issueText(r.error.issues[0])}`);
  }
  const main = r.data.plugins[0];
  const usesVpcni = main.type === "vpcni" ||
    r.data.plugins.some((p) => (p.ipam as { type?: string } | undefined)?.type === "vpcni");
  if (!usesVpcni) {
    throw new InstallError(
      `${source}: no plugin of type "vpcni" and no ipam.type "vpcni": this is not a vpcni conflist`,
    );
  }
  checkWithPluginParser(r.data, source);
  return r.data;
}

/**
 * Runs the plugin's own config parser over every vpcni entry, the way the runtime will hand
 * it over (the list's `cniVersion` and `name` injected), so what install writes is exactly
 * what the plugin accepts.
 */
export function checkWithPluginParser(c: Conflist, source: string): void {
  c.plugins.forEach((p, i) => {
    const ours = p.type === "vpcni" || (p.ipam as { type?: string } | undefined)?.type === "vpcni";
    if (!ours) return;
    try {
      parseConfig({ ...p, cniVersion: c.cniVersion, name: c.name });
    } catch (e) {
      if (e instanceof CniError) {
        throw new InstallError(
          `${source}: plugins[${i}]: ${e.message}${e.details ? ` (${e.details})` : ""}`,
        );
      }
      throw e;
    }
  });
}

/** One schema issue as a user reads it: where, and what is wrong ("missing" when absent). */
function issueText(i: z.core.$ZodIssue): string {
  const where = i.path.join(".") || "(top level)";
  const missing = i.code === "invalid_type" && / received undefined$/.test(i.message);
  return `${where}: ${missing ? `missing (${i.expected} required)` : i.message}`;
}

/** Reads a JSON or YAML file named by `flag`; errors say which and where it went wrong. */
async function readStructured(path: string, flag: string): Promise<unknown> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    throw new InstallError(`${flag}: cannot read ${path}: ${readProblem(e)}`);
  }
  try {
    return parseYaml(text);
  } catch (e) {
    // The yaml error ends with "at line L, column C:" and a code excerpt; say it as
    // path:L:C and keep the sentence.
    const pos = (e as { linePos?: { line: number; col: number }[] }).linePos?.[0];
    const first = (e as Error).message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "");
    throw new InstallError(
      `${flag}: ${path}${pos ? `:${pos.line}:${pos.col}` : ""}: not valid JSON/YAML: ${first}`,
    );
  }
}

/** Why a file could not be read, in words (the OS error text repeats the path). */
function readProblem(e: unknown): string {
  if (e instanceof Deno.errors.NotFound) return "no such file; check the path";
  if (e instanceof Deno.errors.IsADirectory) return "it is a directory; name a file";
  if (e instanceof Deno.errors.PermissionDenied) return "permission denied; run as root";
  return (e as Error).message;
}
