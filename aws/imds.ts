/**
 * IMDSv2 client: what the node learns about itself (instance, placement, VPC CIDRs and each
 * ENI by MAC).
 *
 * Reads are plain `fetch` calls with retries (full-jitter backoff) on 5xx and network
 * failures, and every answer's body is read. (The SDK's `MetadataService` leaves the
 * connection of any non-200 answer open, one socket per 404 of an optional key; it also
 * fetches a fresh token for every single read and ignores a path in the endpoint URL for the
 * token request.) The token is cached until shortly before its TTL ends and refreshed once
 * on a 401.
 * Every read has a hard deadline, so an unreachable endpoint gives an error naming it within
 * seconds instead of hanging.
 *
 * @module
 */

/**
 * The connections IMDS reads go over: at most one idle connection kept per endpoint, for a
 * short while. A node reads a few keys at once now and then; keeping every connection of such
 * a burst open, one set per node, is what runs out of descriptors when a thousand simulated
 * nodes share one process (bench/fleet). Made when the module loads, once per process.
 */
const IMDS_HTTP = Deno.createHttpClient({ poolMaxIdlePerHost: 1, poolIdleTimeout: 10_000 });

/** The IMDS endpoint used when neither an option nor the environment names one. */
export const DEFAULT_IMDS_ENDPOINT = "http://169.254.169.254";
/** Environment variable the SDKs read for the endpoint; honoured here too. */
export const IMDS_ENDPOINT_ENV = "AWS_EC2_METADATA_SERVICE_ENDPOINT";

/** One ENI of this instance, as IMDS shows it. */
export interface NodeEni {
  mac: string;
  deviceIndex: number;
  /** Network card (only on multi-card instances; 0 otherwise). */
  networkCard: number;
  eniId: string;
  subnetId: string;
  subnetCidr: string;
  /** Private IPv4 addresses, the primary first. */
  localIpv4s: string[];
  /** Delegated IPv4 /28 prefixes. */
  ipv4Prefixes: string[];
  securityGroupIds: string[];
}

/** What the node knows about itself. */
export interface NodeMetadata {
  instanceId: string;
  instanceType: string;
  az: string;
  region: string;
  vpcId: string;
  /** All IPv4 CIDR blocks of the VPC. */
  vpcCidrs: string[];
  /** MAC of the primary ENI. */
  primaryMac: string;
  /** ENIs sorted by device index (the primary, index 0, first). */
  enis: NodeEni[];
}

/** Options of {@linkcode ImdsClient}. */
export interface ImdsClientOptions {
  /** Endpoint URL; default: env `AWS_EC2_METADATA_SERVICE_ENDPOINT`, then 169.254.169.254. */
  endpoint?: string;
  /** Limit of one read, retries included, in ms (default 5000). */
  timeoutMs?: number;
  /** Limit of one HTTP attempt in ms (default 1000). */
  attemptTimeoutMs?: number;
  /** Retries per read after the first attempt (default 3). */
  retries?: number;
  /** Token TTL in seconds (default 21600, IMDS's maximum). */
  tokenTtlSeconds?: number;
}

/** A failed IMDS read: names the endpoint and the path. */
export class ImdsError extends Error {
  readonly endpoint: string;
  readonly path: string;
  readonly httpStatus?: number;

  /** Builds the error. */
  constructor(
    endpoint: string,
    path: string,
    detail: string,
    httpStatus?: number,
    cause?: unknown,
  ) {
    super(`IMDS ${endpoint} ${path}: ${detail}`, { cause });
    this.name = "ImdsError";
    this.endpoint = endpoint;
    this.path = path;
    if (httpStatus !== undefined) this.httpStatus = httpStatus;
  }
}

const MAC = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

/** IMDSv2 client. */
export class ImdsClient {
  /** The endpoint in use. */
  readonly endpoint: string;
  #base: URL;
  #retries: number;
  #timeoutMs: number;
  #attemptMs: number;
  #ttl: number;
  #token?: { value: string; expires: number };
  #tokenPending?: Promise<string>;

  /** Creates the client; a malformed endpoint or option throws at once. */
  constructor(o: ImdsClientOptions = {}) {
    const raw = o.endpoint ?? Deno.env.get(IMDS_ENDPOINT_ENV) ?? DEFAULT_IMDS_ENDPOINT;
    let u: URL | undefined;
    try {
      u = new URL(raw);
    } catch { /* reported below */ }
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:")) {
      const from = o.endpoint !== undefined ? "endpoint option" : IMDS_ENDPOINT_ENV;
      throw new TypeError(`ImdsClient: ${from} must be an http(s) URL, got '${raw}'`);
    }
    this.#base = u;
    this.endpoint = u.href.replace(/\/$/, "");
    this.#timeoutMs = positive("timeoutMs", o.timeoutMs ?? 5000);
    this.#attemptMs = positive("attemptTimeoutMs", o.attemptTimeoutMs ?? 1000);
    this.#ttl = positive("tokenTtlSeconds", o.tokenTtlSeconds ?? 21600);
    const retries = o.retries ?? 3;
    if (!Number.isInteger(retries) || retries < 0) {
      throw new TypeError(`ImdsClient: retries must be an integer >= 0, got ${retries}`);
    }
    this.#retries = retries;
  }

  #url(path: string): string {
    return `${this.#base.protocol}//${this.#base.host}${
      this.#base.pathname.replace(/\/$/, "")
    }${path}`;
  }

  async #fetchToken(): Promise<string> {
    const path = "/latest/api/token";
    const deadline = Date.now() + this.#timeoutMs;
    let last: unknown;
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      try {
        const res = await fetch(this.#url(path), {
          client: IMDS_HTTP,
          method: "PUT",
          headers: { "x-aws-ec2-metadata-token-ttl-seconds": String(this.#ttl) },
          signal: AbortSignal.timeout(Math.min(this.#attemptMs, deadline - Date.now())),
        });
        const body = await res.text();
        if (res.ok && body) {
          this.#token = { value: body, expires: Date.now() + this.#ttl * 1000 * 0.9 };
          return body;
        }
        if (res.status < 500) {
          throw new ImdsError(
            this.endpoint,
            path,
            `token refused with HTTP ${res.status}`,
            res.status,
          );
        }
        last = new ImdsError(this.endpoint, path, `HTTP ${res.status}`, res.status);
      } catch (e) {
        if (e instanceof ImdsError && e.httpStatus && e.httpStatus < 500) throw e;
        last = e;
      }
      const pause = Math.random() * Math.min(1000, 50 * 2 ** attempt);
      if (Date.now() + pause >= deadline) break;
      await new Promise((r) => setTimeout(r, pause));
    }
    throw last instanceof ImdsError ? last : new ImdsError(
      this.endpoint,
      path,
      `unreachable within ${this.#timeoutMs} ms (${describe(last)})`,
      undefined,
      last,
    );
  }

  #getToken(refresh = false): Promise<string> {
    if (!refresh && this.#token && this.#token.expires > Date.now()) {
      return Promise.resolve(this.#token.value);
    }
    this.#tokenPending ??= this.#fetchToken().finally(() => (this.#tokenPending = undefined));
    return this.#tokenPending;
  }

  /**
   * Reads one metadata path (below `/latest/meta-data/`). Resolves to `undefined` on 404
   * when `optional`, throws {@linkcode ImdsError} otherwise.
   */
  async get(path: string, optional = false): Promise<string | undefined> {
    const full = `/latest/meta-data/${path.replace(/^\//, "")}`;
    for (let refreshed = false;; refreshed = true) {
      const token = await this.#getToken(refreshed);
      try {
        const r = await this.#withDeadline(full, this.#read(full, token));
        if (r.status === 200) return r.body;
        if (r.status === 404 && optional) return undefined;
        if (r.status === 401 && !refreshed) continue; // token expired or IMDS restarted
        throw new ImdsError(this.endpoint, full, `HTTP ${r.status}`, r.status);
      } catch (e) {
        if (e instanceof ImdsError) throw e;
        throw new ImdsError(this.endpoint, full, describe(e), undefined, e);
      }
    }
  }

  /** One GET, retried on 5xx and network failures; the body is always read. */
  async #read(path: string, token: string): Promise<{ status: number; body: string }> {
    const deadline = Date.now() + this.#timeoutMs;
    let last: unknown;
    for (let attempt = 0; attempt <= this.#retries; attempt++) {
      try {
        const res = await fetch(this.#url(path), {
          client: IMDS_HTTP,
          headers: { "x-aws-ec2-metadata-token": token },
          signal: AbortSignal.timeout(
            Math.max(1, Math.min(this.#attemptMs, deadline - Date.now())),
          ),
        });
        const body = await res.text();
        if (res.status < 500) return { status: res.status, body };
        last = new ImdsError(this.endpoint, path, `HTTP ${res.status}`, res.status);
      } catch (e) {
        last = e;
      }
      const pause = Math.random() * Math.min(1000, 50 * 2 ** attempt);
      if (attempt === this.#retries || Date.now() + pause >= deadline) break;
      await new Promise((r) => setTimeout(r, pause));
    }
    throw last instanceof ImdsError ? last : new ImdsError(
      this.endpoint,
      path,
      `unreachable within ${this.#timeoutMs} ms (${describe(last)})`,
      undefined,
      last,
    );
  }

  async #withDeadline<T>(path: string, p: Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const t = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new ImdsError(this.endpoint, path, `no answer within ${this.#timeoutMs} ms`)),
        this.#timeoutMs,
      );
    });
    try {
      return await Promise.race([p, t]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #required(path: string): Promise<string> {
    const v = (await this.get(path))!.trim();
    if (v === "") throw new ImdsError(this.endpoint, `/latest/meta-data/${path}`, "empty answer");
    return v;
  }

  async #list(path: string): Promise<string[]> {
    const v = await this.get(path, true);
    return (v ?? "").split("\n").map((s) => s.trim()).filter(Boolean);
  }

  /** The ENI with MAC `mac`. */
  async getEni(mac: string): Promise<NodeEni> {
    if (!MAC.test(mac)) throw new TypeError(`ImdsClient.getEni: '${mac}' is not a MAC address`);
    const p = `network/interfaces/macs/${mac}`;
    const [dev, card, eniId, subnetId, subnetCidr, ips, prefixes, sgs] = await Promise.all([
      this.#required(`${p}/device-number`),
      this.get(`${p}/network-card`, true),
      this.#required(`${p}/interface-id`),
      this.#required(`${p}/subnet-id`),
      this.#required(`${p}/subnet-ipv4-cidr-block`),
      this.#list(`${p}/local-ipv4s`),
      this.#list(`${p}/ipv4-prefix`),
      this.#list(`${p}/security-group-ids`),
    ]);
    const deviceIndex = Number(dev);
    if (!Number.isInteger(deviceIndex) || deviceIndex < 0) {
      throw new ImdsError(
        this.endpoint,
        `/latest/meta-data/${p}/device-number`,
        `not a number: '${dev}'`,
      );
    }
    return {
      mac,
      deviceIndex,
      networkCard: await this.#networkCard(p, card),
      eniId,
      subnetId,
      subnetCidr,
      localIpv4s: ips,
      ipv4Prefixes: prefixes,
      securityGroupIds: sgs,
    };
  }

  // EC2 names the path `network-card`; amazon-ec2-metadata-mock serves `network-card-index`
  // and answers `network-card` with a directory listing. Only digits count.
  async #networkCard(p: string, first: string | undefined): Promise<number> {
    if (first !== undefined && /^\d+$/.test(first.trim())) return Number(first.trim());
    if (first === undefined) return 0;
    const alt = (await this.get(`${p}/network-card-index`, true))?.trim();
    return alt && /^\d+$/.test(alt) ? Number(alt) : 0;
  }

  /**
   * The MACs of the ENIs IMDS shows attached now (lower case): one request, so cheap enough
   * to poll while an attach completes.
   */
  async listMacs(): Promise<string[]> {
    return (await this.#list("network/interfaces/macs/"))
      .map((m) => m.replace(/\/$/, "").toLowerCase())
      .filter((m) => MAC.test(m));
  }

  /** Every ENI IMDS shows for this instance, sorted by device index. */
  async getEnis(): Promise<NodeEni[]> {
    const macs = await this.listMacs();
    const enis = await Promise.all(macs.map((m) => this.getEni(m)));
    return enis.sort((a, b) => a.networkCard - b.networkCard || a.deviceIndex - b.deviceIndex);
  }

  /**
   * Polls until IMDS shows the ENI `eniId` (with at least `minIpv4s` addresses), and returns
   * it. IMDS lags EC2: an attached ENI or a newly assigned IP shows up after a while.
   */
  async waitForEni(
    eniId: string,
    o: { timeoutMs?: number; intervalMs?: number; minIpv4s?: number } = {},
  ): Promise<NodeEni> {
    const timeoutMs = o.timeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const eni = (await this.getEnis()).find((e) => e.eniId === eniId);
      if (eni && eni.localIpv4s.length >= (o.minIpv4s ?? 1)) return eni;
      if (Date.now() >= deadline) {
        throw new ImdsError(
          this.endpoint,
          "/latest/meta-data/network/interfaces/macs/",
          `${eniId} ${
            eni ? `has ${eni.localIpv4s.length} addresses` : "not shown"
          } after ${timeoutMs} ms`,
        );
      }
      await new Promise((r) => setTimeout(r, o.intervalMs ?? 250));
    }
  }

  /** Everything the daemon needs to know about the node. */
  async getNodeMetadata(): Promise<NodeMetadata> {
    // The first read goes alone: an unreachable IMDS then fails once, not eight times.
    const instanceId = await this.#required("instance-id");
    const [instanceType, az, regionOrEmpty, primaryMacRaw, enis] = await Promise.all([
      this.#required("instance-type"),
      this.#required("placement/availability-zone"),
      this.get("placement/region", true),
      this.#required("mac"),
      this.getEnis(),
    ]);
    const primaryMac = primaryMacRaw.toLowerCase();
    const base = `network/interfaces/macs/${primaryMac}`;
    const [vpcId, vpcCidrs] = await Promise.all([
      this.#required(`${base}/vpc-id`),
      this.#list(`${base}/vpc-ipv4-cidr-blocks`),
    ]);
    if (vpcCidrs.length === 0) vpcCidrs.push(await this.#required(`${base}/vpc-ipv4-cidr-block`));
    // Older IMDS versions have no placement/region; the AZ minus its letter is the region.
    const region = regionOrEmpty?.trim() || az.replace(/[a-z]$/, "");
    return { instanceId, instanceType, az, region, vpcId, vpcCidrs, primaryMac, enis };
  }
}

function positive(name: string, v: number): number {
  if (!Number.isFinite(v) || v <= 0) {
    throw new TypeError(`ImdsClient: ${name} must be a positive number, got ${v}`);
  }
  return v;
}

function describe(e: unknown): string {
  if (!e) return "no answer";
  const m = (e as Error).message ?? String(e);
  const code = /\b(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH)\b/.exec(m)?.[1];
  if (code) return code === "ECONNREFUSED" ? "connection refused" : code;
  if ((e as Error).name === "TimeoutError") return "timed out";
  return m.replace(/^Error making request to the metadata service: /, "");
}
