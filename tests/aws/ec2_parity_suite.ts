/**
 * Where the simulator and moto were seen to disagree, what EC2's documentation says, asserted
 * against every target: the XML as it travels (namespace, `privateDnsName`, `requesterId`, the
 * error document), attaching an ENI that is attached already, and creating an ENI in a full
 * subnet. The raw answers are read through a recording proxy on loopback, in front of the
 * target; the requests are the real client's.
 *
 * @module
 */
import assert from "node:assert/strict";
import { Ec2Error } from "../../aws/ec2.ts";
import { type Ec2Target, eventually, type Quirk, suiteTest, targetClient } from "./ec2_suite.ts";

/** The namespace of every EC2 answer, as the API reference's examples show it. */
const EC2_XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/";

/** One answer the proxy passed on. */
interface Recorded {
  action: string;
  status: number;
  body: string;
}

/** A loopback proxy in front of `endpoint` that keeps every answer's body. */
function recordingProxy(endpoint: string) {
  const answers: Recorded[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      const body = await req.text();
      const url = new URL(req.url);
      const r = await fetch(endpoint + url.pathname + url.search, {
        method: req.method,
        headers: req.headers,
        body: req.method === "GET" ? undefined : body,
      });
      const text = await r.text();
      const action = new URLSearchParams(body).get("Action") ?? "";
      answers.push({ action, status: r.status, body: text });
      const headers = new Headers(r.headers);
      headers.delete("content-length");
      headers.delete("content-encoding");
      return new Response(text, { status: r.status, headers });
    },
  );
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    /** The last answer to `action`. */
    last(action: string): Recorded {
      const a = answers.findLast((x) => x.action === action);
      assert.ok(a, `no answer to ${action} was recorded`);
      return a;
    },
    close: () => server.shutdown(),
  };
}

/** Registers the parity tests under `name`. */
export function ec2ParitySuite(name: string, start: () => Promise<Ec2Target>): void {
  const t = suiteTest(name, start);
  const has = (target: Ec2Target, q: Quirk) => target.quirks.has(q);

  t("the XML is EC2's: namespace, privateDnsName, requesterId, error document", async (target) => {
    const proxy = recordingProxy(target.endpoint);
    const c = targetClient({ ...target, endpoint: proxy.endpoint }, { maxAttempts: 1 });
    try {
      const eni = await c.createNetworkInterface({
        subnetId: target.world.subnetId,
        securityGroupIds: target.world.securityGroupIds,
      });
      await eventually(
        "visible",
        async () => (await c.describeNetworkInterfaces({ ids: [eni.eniId] })).length || undefined,
      );
      const ok = proxy.last("DescribeNetworkInterfaces");
      assert.equal(ok.status, 200);
      const xmlns = /^<\?xml[^>]*>\s*<DescribeNetworkInterfacesResponse xmlns="([^"]+)">/.exec(
        ok.body,
      )?.[1];
      assert.equal(
        xmlns,
        has(target, "xmlnsWithoutSlash") ? EC2_XMLNS.slice(0, -1) : EC2_XMLNS,
      );
      // privateDnsName of the ENI and of its address, named after the primary IP.
      const dns = `ip-${eni.privateIp.replaceAll(".", "-")}.`;
      const names = [...ok.body.matchAll(/<privateDnsName>([^<]*)<\/privateDnsName>/g)]
        .map((m) => m[1]);
      if (has(target, "noPrivateDnsName")) assert.deepEqual(names, []);
      else {
        assert.equal(names.length, 2, ok.body);
        assert.ok(names.every((n) => n.startsWith(dns)), names.join());
      }
      const requester = /<requesterId>([^<]*)<\/requesterId>/.exec(ok.body)?.[1];
      if (has(target, "requesterIdNotAccount")) {
        assert.ok(requester && requester !== target.world.accountId, String(requester));
      } else assert.equal(requester, target.world.accountId);
      assert.match(ok.body, /<requesterManaged>false<\/requesterManaged>/);

      await assert.rejects(
        c.describeNetworkInterfaces({ ids: ["eni-0000000000000dead"] }),
        (e: unknown) => e instanceof Ec2Error && e.code === "InvalidNetworkInterfaceID.NotFound",
      );
      const err = proxy.last("DescribeNetworkInterfaces");
      assert.equal(err.status, 400);
      const root = has(target, "errorXmlns")
        ? `<Response xmlns="${EC2_XMLNS.slice(0, -1)}">`
        : "<Response>";
      assert.match(
        err.body,
        new RegExp(
          String.raw`^<\?xml[^>]*>\s*` + root.replace(/[.?/]/g, "\\$&") +
            String.raw`<Errors><Error><Code>InvalidNetworkInterfaceID\.NotFound</Code>` +
            String.raw`<Message>[^<]+</Message></Error></Errors><RequestID>[^<]+</RequestID>` +
            String.raw`</Response>\s*$`,
        ),
      );
    } finally {
      c.close();
      await proxy.close();
    }
  });

  t(
    "attaching an ENI that is attached already is InvalidNetworkInterface.InUse",
    async (target, c) => {
      const { world } = target;
      const eni = await c.createNetworkInterface({
        subnetId: world.subnetId,
        securityGroupIds: world.securityGroupIds,
      });
      const first = await c.attachNetworkInterface({
        eniId: eni.eniId,
        instanceId: world.instanceId,
        deviceIndex: 1,
      });
      await eventually("attached", async () => {
        const [e] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
        return e.attachment?.status === "attached" ? true : undefined;
      });
      const again = c.attachNetworkInterface({
        eniId: eni.eniId,
        instanceId: world.instanceId,
        deviceIndex: 2,
      });
      if (has(target, "reattachAttached")) {
        assert.notEqual(await again, first, "quirk reattachAttached: a second attachment");
        return;
      }
      await assert.rejects(
        again,
        (e: unknown) =>
          e instanceof Ec2Error && e.code === "InvalidNetworkInterface.InUse" &&
          e.httpStatus === 400,
      );
      const [after] = await c.describeNetworkInterfaces({ ids: [eni.eniId] });
      assert.equal(after.attachment?.attachmentId, first, "the first attachment stays");
      assert.equal(after.attachment?.deviceIndex, 1);
    },
  );

  t("a full subnet refuses the next ENI with InsufficientFreeAddressesInSubnet", async (target) => {
    const { world } = target;
    const c = targetClient(target, { maxAttempts: 1 });
    try {
      const [tiny] = await c.describeSubnets({ ids: [world.tinySubnetId] });
      // A /28 has 16 addresses; EC2 keeps the first four and the last one.
      assert.equal(tiny.availableIpCount, 11);
      const ips: string[] = [];
      let refused: unknown;
      for (let i = 0; i < 12 && !refused; i++) {
        await c.createNetworkInterface({ subnetId: tiny.subnetId, securityGroupIds: [] })
          .then((e) => ips.push(e.privateIp), (e) => (refused = e));
      }
      if (has(target, "subnetOverfill")) {
        assert.equal(refused, undefined, "quirk subnetOverfill: a 12th ENI in a /28");
        return;
      }
      assert.ok(refused instanceof Ec2Error, String(refused));
      assert.equal(refused.code, "InsufficientFreeAddressesInSubnet");
      assert.equal(ips.length, 11);
      const base = Number(tiny.cidr.split("/")[0].split(".")[3]);
      const lastOctets = ips.map((ip) => Number(ip.split(".")[3]) - base).sort((a, b) => a - b);
      assert.deepEqual(lastOctets, [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
      const [full] = await c.describeSubnets({ ids: [world.tinySubnetId] });
      assert.equal(full.availableIpCount, 0);
    } finally {
      c.close();
    }
  });
}
