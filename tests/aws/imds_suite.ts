/**
 * The IMDS client suite, run against every IMDS we have (amazon-ec2-metadata-mock, the
 * simulator). A target starts an IMDS and says what the node should learn from it.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ImdsClient, ImdsError, type NodeMetadata } from "../../aws/imds.ts";
import { freePort, startSilentServer } from "../helpers/aws_peers.ts";

/** A running IMDS and the metadata it must yield. */
export interface ImdsTarget {
  endpoint: string;
  expected: NodeMetadata;
  /** Puts what the client read in the order `expected` uses (e.g. secondary IPs sorted). */
  normalize?: (md: NodeMetadata) => NodeMetadata;
  /** Makes every token issued so far invalid (e.g. restart the server on the same port). */
  invalidateTokens?: () => Promise<void>;
  close(): Promise<void>;
}

/** Registers the suite's tests under `name`. */
export function imdsSuite(name: string, start: () => Promise<ImdsTarget>): void {
  const t = (title: string, fn: (target: ImdsTarget) => Promise<void>) =>
    Deno.test({
      name: `imds[${name}]: ${title}`,
      sanitizeResources: false,
      sanitizeOps: false,
      fn: async () => {
        const target = await start();
        try {
          await fn(target);
        } finally {
          await target.close();
        }
      },
    });

  t("reads the node: instance, placement, VPC CIDRs and every ENI by MAC", async (target) => {
    const read = await new ImdsClient({ endpoint: target.endpoint }).getNodeMetadata();
    const md = target.normalize ? target.normalize(read) : read;
    assert.deepEqual(md, target.expected);
    assert.equal(md.enis[0].mac, md.primaryMac, "the primary ENI comes first");
  });

  t("getEnis lists the same ENIs sorted by device index", async (target) => {
    const enis = await new ImdsClient({ endpoint: target.endpoint }).getEnis();
    const md = { ...target.expected, enis };
    assert.deepEqual((target.normalize ? target.normalize(md) : md).enis, target.expected.enis);
    assert.deepEqual(enis.map((e) => e.deviceIndex), [...enis.map((e) => e.deviceIndex)].sort());
  });

  t("the endpoint can come from AWS_EC2_METADATA_SERVICE_ENDPOINT", async (target) => {
    const before = Deno.env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    Deno.env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", target.endpoint);
    try {
      const c = new ImdsClient();
      assert.equal(c.endpoint, target.endpoint);
      assert.equal(await c.get("instance-id"), target.expected.instanceId);
    } finally {
      if (before === undefined) Deno.env.delete("AWS_EC2_METADATA_SERVICE_ENDPOINT");
      else Deno.env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", before);
    }
  });

  t("a token that stopped being valid is replaced once, transparently", async (target) => {
    if (!target.invalidateTokens) throw new Error("target cannot invalidate tokens");
    const c = new ImdsClient({ endpoint: target.endpoint });
    assert.equal(await c.get("instance-id"), target.expected.instanceId);
    await target.invalidateTokens();
    assert.equal(await c.get("instance-type"), target.expected.instanceType);
  });

  t(
    "a path that does not exist is an ImdsError naming it; optional reads give undefined",
    async (target) => {
      const c = new ImdsClient({ endpoint: target.endpoint });
      assert.equal(await c.get("no-such-path", true), undefined);
      await assert.rejects(
        c.get("no-such-path"),
        (e: unknown) =>
          e instanceof ImdsError && e.httpStatus === 404 &&
          e.message.includes(
            `${target.endpoint.replace(/\/$/, "")} /latest/meta-data/no-such-path`,
          ),
      );
    },
  );
}

/** Registers the endpoint-failure tests (no IMDS needed). */
export function imdsFailureTests(): void {
  const opts = { sanitizeResources: false, sanitizeOps: false };
  // A watchdog, not a timing assertion: it only turns a hang into a failure.
  const settlesWithin = <T>(p: Promise<T>, ms: number) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    return Promise.race([
      p,
      new Promise<never>((_, rej) => {
        timer = setTimeout(() => rej(new Error(`still pending after ${ms} ms: a hang`)), ms);
      }),
    ]).finally(() => clearTimeout(timer));
  };

  Deno.test({
    name: "imds: a refused endpoint fails with an error naming it, not a hang",
    ...opts,
    fn: async () => {
      const endpoint = `http://127.0.0.1:${freePort()}`;
      const c = new ImdsClient({ endpoint, timeoutMs: 3000 });
      await assert.rejects(
        settlesWithin(c.getNodeMetadata(), 20_000),
        (e: unknown) =>
          e instanceof ImdsError && e.message.includes(endpoint) &&
          /connection refused|unreachable/.test(e.message),
      );
    },
  });

  Deno.test({
    name: "imds: an endpoint that accepts but never answers fails with a timeout naming it",
    ...opts,
    fn: async () => {
      const silent = startSilentServer();
      try {
        const c = new ImdsClient({
          endpoint: silent.endpoint,
          timeoutMs: 2000,
          attemptTimeoutMs: 500,
        });
        await assert.rejects(
          settlesWithin(c.getNodeMetadata(), 20_000),
          (e: unknown) => e instanceof ImdsError && e.message.includes(silent.endpoint),
        );
      } finally {
        await silent.close();
      }
    },
  });

  Deno.test("imds: a malformed endpoint or option is refused at construction, naming it", () => {
    assert.throws(
      () => new ImdsClient({ endpoint: "169.254.169.254" }),
      /endpoint option must be an http\(s\) URL/,
    );
    assert.throws(() => new ImdsClient({ endpoint: "ftp://x" }), /endpoint option/);
    assert.throws(() => new ImdsClient({ endpoint: "http://x", timeoutMs: 0 }), /timeoutMs/);
    assert.throws(() => new ImdsClient({ endpoint: "http://x", retries: -1 }), /retries/);
    const before = Deno.env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    Deno.env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", "not a url");
    try {
      assert.throws(
        () => new ImdsClient(),
        /AWS_EC2_METADATA_SERVICE_ENDPOINT must be an http\(s\) URL/,
      );
    } finally {
      if (before === undefined) Deno.env.delete("AWS_EC2_METADATA_SERVICE_ENDPOINT");
      else Deno.env.set("AWS_EC2_METADATA_SERVICE_ENDPOINT", before);
    }
  });

  Deno.test("imds: getEni refuses something that is not a MAC", async () => {
    await assert.rejects(
      new ImdsClient({ endpoint: "http://127.0.0.1:1" }).getEni("eth0"),
      /not a MAC/,
    );
  });
}
