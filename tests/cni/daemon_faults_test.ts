/**
 * A daemon that answers outside the plugin↔daemon protocol: codes it may not send, bodies
 * that are not JSON or lack fields, answers larger than the bound, answers that never end.
 * The plugin answers only the codes its README allows (102 "outside the protocol", 11 for
 * a silent daemon) with its own message, within a bound, and changes nothing.
 *
 * The real daemon cannot be made to commit these faults, so a raw unix-socket server in
 * this test plays the daemon; everything else (the plugin process, the node netns) is real.
 */
import assert from "node:assert/strict";
import { kernelState } from "../helpers/cni_kernel_state.ts";
import { makeNode, podEnv } from "./harness.ts";
import { assertRefused, runBounded, withInstalledPlugin } from "./refusal.ts";

type Behaviour = (conn: Deno.Conn) => Promise<void>;

const enc = new TextEncoder();

async function readRequest(conn: Deno.Conn): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  let text = "";
  for (;;) {
    const n = await conn.read(buf);
    if (n === null) return;
    text += new TextDecoder().decode(buf.subarray(0, n));
    const head = text.indexOf("\r\n\r\n");
    if (head < 0) continue;
    const len = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? 0);
    if (text.length - head - 4 >= len) return;
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
}

/** Answers with HTTP 200 and `body` as is. */
function answer(body: string | Uint8Array): Behaviour {
  return async (conn) => {
    await readRequest(conn);
    const b = typeof body === "string" ? enc.encode(body) : body;
    await writeAll(
      conn,
      enc.encode(`HTTP/1.1 200 OK\r\ncontent-length: ${b.length}\r\nconnection: close\r\n\r\n`),
    );
    await writeAll(conn, b);
  };
}

const refusal = (o: Record<string, unknown>) => answer(JSON.stringify({ ok: false, ...o }));

/** Starts a unix-socket server whose answer is whatever `current` says. */
function fakeDaemon(path: string) {
  let current: Behaviour = answer("{}");
  const listener = Deno.listen({ transport: "unix", path });
  const conns = new Set<Deno.Conn>();
  const loop = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      current(conn).catch(() => {}).finally(() => {
        conns.delete(conn);
        try {
          conn.close();
        } catch { /* closed */ }
      });
    }
  })().catch(() => {});
  return {
    set(b: Behaviour) {
      current = b;
    },
    async close() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      await loop;
    },
  };
}

interface Case {
  name: string;
  behaviour: Behaviour;
  code: number;
  msg: RegExp;
  verbs?: string[];
  /** A message the plugin must not pass on (the daemon's own words in `msg`). */
  notInMsg?: RegExp;
}

Deno.test("a misbehaving daemon: only the documented codes, the plugin's message", async (t) => {
  const testNode = await makeNode();
  const node = await withInstalledPlugin(testNode);
  const socket = `${node.dir}/fake.sock`;
  const daemon = fakeDaemon(socket);
  const pod = await node.pod();
  const allocation = {
    network: "vcn-faults",
    containerId: "vcn-f-1",
    ifName: "eth0",
    ip: "10.77.0.70",
    pool: "default",
    eni: {
      id: "eni-1",
      mac: "02:00:00:77:00:01",
      deviceIndex: 0,
      primary: true,
      subnetId: "subnet-1",
      subnetCidr: "10.77.0.0/24",
      gateway: "10.77.0.1",
      routeTable: 100,
    },
    vpcCidrs: ["10.77.0.0/16"],
    nodeIps: [],
  };
  const outside = /answered|refused .* which the plugin↔daemon protocol does not allow|malformed/;
  const cases: Case[] = [
    {
      name: "a negative code",
      behaviour: refusal({ code: -1, msg: "DAEMON-SAYS" }),
      code: 102,
      msg: /refused \w+ with code -1/,
      notInMsg: /DAEMON-SAYS/,
    },
    {
      name: "an unknown code",
      behaviour: refusal({ code: 42, msg: "DAEMON-SAYS" }),
      code: 102,
      msg: /with code 42/,
      notInMsg: /DAEMON-SAYS/,
    },
    {
      name: "a code that is not an integer",
      behaviour: refusal({ code: 7.5, msg: "x" }),
      code: 102,
      msg: /code 7\.5/,
    },
    {
      name: "a code that is a string",
      behaviour: refusal({ code: "7", msg: "x" }),
      code: 102,
      msg: /no numeric code/,
    },
    { name: "no code", behaviour: refusal({ msg: "x" }), code: 102, msg: /no numeric code/ },
    {
      name: "a vpcni datapath code (100)",
      behaviour: refusal({ code: 100, msg: "x" }),
      code: 102,
      msg: /code 100/,
    },
    {
      name: "code 1 (the daemon's protocol-version complaint)",
      behaviour: refusal({ code: 1, msg: "x" }),
      code: 102,
      msg: /code 1,/,
    },
    {
      name: "code 0 with ok false",
      behaviour: refusal({ code: 0, msg: "x" }),
      code: 102,
      msg: /code 0,/,
    },
    {
      name: "an allowed code without a message",
      behaviour: refusal({ code: 7 }),
      code: 102,
      msg: /code 7/,
    },
    {
      name: "body not JSON",
      behaviour: answer("<html>teapot</html>"),
      code: 102,
      msg: /not a JSON object/,
    },
    { name: "body a JSON array", behaviour: answer("[1,2]"), code: 102, msg: /not a JSON object/ },
    { name: "body JSON null", behaviour: answer("null"), code: 102, msg: /not a JSON object/ },
    { name: "no ok field", behaviour: answer('{"allocation":{}}'), code: 102, msg: /without "ok"/ },
    {
      name: "ok true without the allocation",
      behaviour: answer('{"ok":true}'),
      code: 102,
      msg: /malformed answer/,
      verbs: ["ADD", "CHECK"],
    },
    {
      name: "an allocation missing the ENI",
      behaviour: answer(
        JSON.stringify({ ok: true, allocation: { ...allocation, eni: undefined } }),
      ),
      code: 102,
      msg: /malformed answer/,
      verbs: ["ADD"],
    },
    {
      name: "an allocation with an address that is not one",
      behaviour: answer(
        JSON.stringify({ ok: true, allocation: { ...allocation, ip: "10.77.0.999" } }),
      ),
      code: 102,
      msg: /malformed answer/,
      verbs: ["ADD"],
    },
    {
      name: "a body larger than 1 MiB",
      behaviour: answer(new Uint8Array(3 * 1024 * 1024).fill(0x20)),
      code: 102,
      msg: /outside the protocol/,
    },
    {
      name: "an answer that is not HTTP",
      behaviour: async (conn) => {
        await readRequest(conn);
        await writeAll(conn, enc.encode("SSH-2.0-OpenSSH_9.6\r\n"));
      },
      code: 102,
      msg: /outside the protocol/,
    },
    {
      name: "a connection closed without an answer",
      behaviour: async (conn) => await readRequest(conn),
      code: 102,
      msg: /outside the protocol/,
    },
    {
      name: "a daemon that never answers",
      behaviour: async (conn) => {
        await readRequest(conn);
        await new Promise((r) => setTimeout(r, 5000));
      },
      code: 11,
      msg: /did not answer \w+ within 400 ms/,
    },
    {
      name: "an answer that trickles and never ends",
      behaviour: async (conn) => {
        await readRequest(conn);
        await writeAll(conn, enc.encode("HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n"));
        for (let i = 0; i < 100; i++) {
          await writeAll(conn, enc.encode(" "));
          await new Promise((r) => setTimeout(r, 50));
        }
      },
      code: 11,
      msg: /within 400 ms/,
    },
  ];
  try {
    const base = {
      cniVersion: "1.1.0",
      name: "vcn-faults",
      type: "vpcni",
      datapath: "veth",
      mtu: 1500,
      daemonSocket: socket,
      daemonTimeoutMs: 400,
    };
    const prevResult = {
      cniVersion: "1.1.0",
      interfaces: [{ name: "eth0", sandbox: pod.path }],
      ips: [{ address: "10.77.0.70/32", gateway: "169.254.1.1", interface: 0 }],
    };
    for (const c of cases) {
      for (const verb of c.verbs ?? ["ADD", "CHECK", "STATUS"]) {
        for (const role of ["main", "ipam"]) {
          await t.step(`${verb} ${role}: ${c.name}`, async () => {
            daemon.set(c.behaviour);
            const conf = role === "main"
              ? { ...base, ...(verb === "CHECK" ? { prevResult } : {}) }
              : {
                cniVersion: "1.1.0",
                name: "vcn-faults",
                type: "ptp",
                ipam: { type: "vpcni", daemonSocket: socket, daemonTimeoutMs: 400 },
              };
            const before = [await kernelState(node.node.name), await kernelState(pod.name)];
            const r = await runBounded(
              node,
              podEnv(verb, "vcn-f-1", pod.path),
              JSON.stringify(conf),
              10_000,
            );
            // STATUS turns every failure to reach a usable daemon into 50 (plugin not available).
            const code = verb === "STATUS" ? 50 : c.code;
            assertRefused(r, code, verb === "STATUS" ? /plugin not available/ : c.msg);
            const e = r.json as { msg: string };
            if (c.notInMsg) {
              assert.doesNotMatch(e.msg, c.notInMsg, "the daemon's words are not the msg");
            }
            if (verb !== "STATUS") assert.match(e.msg, new RegExp(`${outside.source}|within`));
            assert.deepEqual(
              [await kernelState(node.node.name), await kernelState(pod.name)],
              before,
              "the kernel is unchanged",
            );
          });
        }
      }
    }
    await t.step("a daemon bug (999) and an unwritable checkpoint (5) pass on", async () => {
      for (
        const [code, msg] of [
          [999, "daemon bug during add: allocation 10.77.0.70 refers to unknown ENI eni-1"],
          [5, "could not record 10.77.0.70: writing the checkpoint in /x failed: No space"],
        ] as const
      ) {
        daemon.set(refusal({ code, msg }));
        const r = await runBounded(node, podEnv("ADD", "vcn-f-1", pod.path), JSON.stringify(base));
        assertRefused(r, code, new RegExp(`^${msg.slice(0, 30)}`));
      }
    });
    await t.step("an allowed code passes on, its text cleaned and bounded", async () => {
      daemon.set(refusal({ code: 7, msg: "no pool \x1b[31mnamed\x1b[0m x" + "y".repeat(5000) }));
      const r = await runBounded(node, podEnv("ADD", "vcn-f-1", pod.path), JSON.stringify(base));
      assertRefused(r, 7, /^no pool  ?\[31mnamed/);
      const e = r.json as { msg: string };
      assert.ok(!e.msg.includes("\x1b"), "no escape character in the msg");
      assert.ok(e.msg.length <= 1025, `msg is ${e.msg.length} characters`);
    });
  } finally {
    await daemon.close();
    await testNode.cleanup();
  }
});
