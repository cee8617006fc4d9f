import assert from "node:assert/strict";
import {
  decodeChunked,
  parseHttpResponse,
  postUnix,
  UnixHttpTimeoutError,
  UnixSocketError,
} from "./unix_http.ts";

const enc = (s: string) => new TextEncoder().encode(s);

Deno.test("parseHttpResponse reads content-length and chunked bodies", () => {
  assert.deepEqual(
    parseHttpResponse(enc("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}trailing")),
    {
      status: 200,
      body: "{}",
    },
  );
  assert.deepEqual(
    parseHttpResponse(
      enc(
        "HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
      ),
    ),
    { status: 500, body: "abcde" },
  );
  assert.throws(() => parseHttpResponse(enc("garbage")), /no HTTP header/);
  assert.throws(() => decodeChunked(enc("zz\r\n")), /malformed chunk size/);
});

// postUnix blocks the calling thread, so the server must live in another process.
const SERVER = `
const path = Deno.args[0];
Deno.serve({ path, onListen() { console.log("ready"); } }, async (req) => {
  const body = await req.text();
  if (body === "slow") await new Promise((r) => setTimeout(r, 1000));
  return Response.json({ got: body, path: new URL(req.url).pathname });
});`;

Deno.test("postUnix talks to Deno.serve, names a missing socket, times out on a slow server", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vcn-http-" });
  const path = `${dir}/s.sock`;
  const server = new Deno.Command("deno", {
    args: ["eval", SERVER, path],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  try {
    const reader = server.stdout.getReader();
    const first = await reader.read();
    assert.match(new TextDecoder().decode(first.value), /ready/);
    const r = postUnix(path, "/v1/ipam", '{"a":1}', 2000);
    assert.equal(r.status, 200);
    assert.deepEqual(JSON.parse(r.body), { got: '{"a":1}', path: "/v1/ipam" });
    const t0 = performance.now();
    assert.throws(() => postUnix(path, "/v1/ipam", "slow", 200), UnixHttpTimeoutError);
    assert.ok(performance.now() - t0 < 900, "the timeout bounds the wait");
    assert.throws(() => postUnix(`${dir}/absent.sock`, "/", "{}", 1000), (e: unknown) => {
      assert.ok(e instanceof UnixSocketError);
      assert.match(e.message, /connect .*absent\.sock: No such file or directory/);
      return true;
    });
    reader.releaseLock();
  } finally {
    server.kill();
    await server.status;
    await server.stdout.cancel().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
