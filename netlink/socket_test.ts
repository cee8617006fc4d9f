/**
 * Interrupted dumps. The kernel marks a dump NLM_F_DUMP_INTR when the table changed while it
 * was walked; that race cannot be produced on demand, so these tests inject it at the codec
 * level: the replies are real netlink bytes built with the codec, some of them carrying the
 * flag, fed to the same reader and retry loop `NetlinkSocket.dump` uses on a live socket.
 */
import assert from "node:assert/strict";
import {
  MessageBuilder,
  type NetlinkMessage,
  NLM_F_DUMP_INTR,
  NLM_F_MULTI,
  NLMSG_DONE,
  parseMessages,
  RTM,
} from "./codec.ts";
import {
  DUMP_ATTEMPTS,
  DumpInterruptedError,
  NetlinkSocket,
  readDumpPass,
  untilWholeDump,
} from "./socket.ts";
import { NetlinkError } from "./errors.ts";
import { listLinks } from "./link.ts";

/** One reply datagram: a link entry per index, then NLMSG_DONE; `intr` flags every entry. */
function datagram(seq: number, indexes: number[], intr: boolean): NetlinkMessage[] {
  const parts = indexes.map((i) =>
    new MessageBuilder(RTM.NEWLINK, NLM_F_MULTI | (intr ? NLM_F_DUMP_INTR : 0)).u32(i).finish(seq)
      .slice()
  );
  // A reply to another request in the same datagram is skipped.
  parts.push(new MessageBuilder(RTM.NEWLINK, NLM_F_MULTI).u32(999).finish(seq + 1000).slice());
  parts.push(new MessageBuilder(NLMSG_DONE, NLM_F_MULTI).i32(0).finish(seq).slice());
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    bytes.set(p, off);
    off += p.length;
  }
  return parseMessages(bytes);
}

const index = (m: NetlinkMessage) =>
  new DataView(m.data.buffer, m.data.byteOffset).getUint32(0, true);

/** A dump whose first `interrupted` passes the kernel marks interrupted. */
function flakyDump(interrupted: number) {
  let passes = 0;
  const run = () =>
    untilWholeDump("RTM_GETLINK", () => {
      passes++;
      const seq = 100 + passes;
      // An interrupted pass may miss an entry; the whole one has all three.
      const intr = passes <= interrupted;
      const replies = [datagram(seq, intr ? [1, 3] : [1, 2, 3], intr)];
      return readDumpPass(() => replies.shift() ?? [], seq, "RTM_GETLINK", index, () => undefined);
    });
  return { run, passes: () => passes };
}

Deno.test("dump: an interrupted pass is thrown away and the dump asked for again", () => {
  const d = flakyDump(2);
  assert.deepEqual(d.run(), [1, 2, 3], "the entries of the whole pass, not the interrupted ones");
  assert.equal(d.passes(), 3);
});

Deno.test("dump: a whole dump is read once", () => {
  const d = flakyDump(0);
  assert.deepEqual(d.run(), [1, 2, 3]);
  assert.equal(d.passes(), 1);
});

Deno.test("dump: interrupted on every pass: a typed error after DUMP_ATTEMPTS, never partial", () => {
  const d = flakyDump(Infinity);
  let err: unknown;
  try {
    d.run();
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof DumpInterruptedError, String(err));
  assert.equal(d.passes(), DUMP_ATTEMPTS);
  assert.equal(DUMP_ATTEMPTS, 5);
  assert.ok(err instanceof NetlinkError, "callers that catch NetlinkError see it");
  assert.equal(err.errno, 4, "EINTR");
  assert.equal(err.attempts, 5);
  assert.match(err.message, /RTM_GETLINK dump: .*all 5 passes interrupted.*NLM_F_DUMP_INTR/);
});

Deno.test("dump: a live dump on a real socket still reads the whole table", () => {
  using sock = NetlinkSocket.open();
  const links = listLinks(sock);
  assert.ok(links.some((l) => l.name === "lo"), "loopback listed");
});
