/**
 * A far end that says whom it sees: `serve <addr> <port>` answers each TCP connection with
 * the peer's address and closes; `ask <addr> <port>` prints that answer, or "unreachable"
 * when no answer comes within 2 s. Run inside a netns with `ip netns exec`.
 *
 * @module
 */
const [verb, host, port] = Deno.args;
if (verb === "serve") {
  const l = Deno.listen({ hostname: host, port: Number(port) });
  console.log("ready");
  for await (const c of l) {
    const peer = (c.remoteAddr as Deno.NetAddr).hostname;
    await c.write(new TextEncoder().encode(peer)).catch(() => {});
    c.close();
  }
} else {
  const timeout = new Promise<never>((_, reject) =>
    setTimeout(() => reject(new Error("timeout")), 2000)
  );
  try {
    const c = await Promise.race([Deno.connect({ hostname: host, port: Number(port) }), timeout]);
    const buf = new Uint8Array(64);
    const n = await Promise.race([c.read(buf), timeout]);
    c.close();
    console.log(new TextDecoder().decode(buf.subarray(0, n ?? 0)));
  } catch {
    console.log("unreachable");
  }
  Deno.exit(0);
}
