import assert from "node:assert/strict";
import {
  getString,
  getU16,
  getU32,
  MessageBuilder,
  NLA_F_NESTED,
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  NLM_F_CREATE,
  NLM_F_MULTI,
  NLM_F_REQUEST,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSGERR_ATTR_MSG,
  NLMSGERR_ATTR_OFFS,
  parseAttrs,
  parseErrorMessage,
  parseMessages,
  RTM,
} from "./codec.ts";

Deno.test("MessageBuilder writes the header, pads attributes and nests", () => {
  const b = new MessageBuilder(RTM.NEWLINK, NLM_F_CREATE, 8);
  b.u8(0).u8(0).u16(0).i32(7).u32(0).u32(0); // ifinfomsg
  b.attrString(3, "eth1"); // 4 + 5 → padded to 12
  const nest = b.beginNest(18);
  b.attrString(1, "veth");
  b.attrU16(7, 0x1234);
  b.endNest(nest);
  b.attrU32(4, 9001);
  const bytes = b.finish(42);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  assert.equal(v.getUint32(0, true), bytes.length);
  assert.equal(bytes.length % 4, 0);
  assert.equal(v.getUint16(4, true), RTM.NEWLINK);
  assert.equal(v.getUint16(6, true), NLM_F_CREATE | NLM_F_REQUEST);
  assert.equal(v.getUint32(8, true), 42);
  assert.equal(v.getInt32(16 + 4, true), 7);
  // attribute lengths are the unpadded size; the next attribute starts aligned
  assert.equal(v.getUint16(32, true), 9);
  assert.equal(v.getUint16(44 + 2, true), 18 | NLA_F_NESTED);

  const [msg] = parseMessages(bytes);
  assert.equal(msg.seq, 42);
  const attrs = parseAttrs(msg.data, 16);
  assert.equal(getString(attrs.get(3)!), "eth1");
  assert.equal(getU32(attrs.get(4)!), 9001);
  const inner = parseAttrs(attrs.get(18)!); // NLA_F_NESTED stripped from the type
  assert.equal(getString(inner.get(1)!), "veth");
  assert.equal(getU16(inner.get(7)!), 0x1234);
});

Deno.test("MessageBuilder grows past its initial capacity", () => {
  const b = new MessageBuilder(RTM.NEWROUTE, 0, 4);
  for (let i = 0; i < 100; i++) b.attrU32(i + 1, i);
  const bytes = b.finish(1);
  assert.equal(bytes.length, 16 + 100 * 8);
  const attrs = parseAttrs(parseMessages(bytes)[0].data);
  assert.equal(attrs.size, 100);
  assert.equal(getU32(attrs.get(100)!), 99);
});

function rawMessage(type: number, flags: number, seq: number, payload: Uint8Array): Uint8Array {
  const len = 16 + payload.length;
  const out = new Uint8Array((len + 3) & ~3);
  const v = new DataView(out.buffer);
  v.setUint32(0, len, true);
  v.setUint16(4, type, true);
  v.setUint16(6, flags, true);
  v.setUint32(8, seq, true);
  out.set(payload, 16);
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((t, p) => t + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

Deno.test("parseMessages splits a multipart dump up to NLMSG_DONE", () => {
  const a = rawMessage(RTM.NEWLINK, NLM_F_MULTI, 5, new Uint8Array(17));
  const b = rawMessage(RTM.NEWLINK, NLM_F_MULTI, 5, new Uint8Array(20));
  const done = rawMessage(NLMSG_DONE, NLM_F_MULTI, 5, new Uint8Array(4));
  const msgs = parseMessages(concat(a, b, done));
  assert.deepEqual(msgs.map((m) => m.type), [RTM.NEWLINK, RTM.NEWLINK, NLMSG_DONE]);
  assert.equal(msgs[0].data.length, 17);
  assert.equal(msgs[1].data.length, 20);
});

Deno.test("parseMessages refuses a message whose length runs past the datagram", () => {
  const m = rawMessage(RTM.NEWLINK, 0, 1, new Uint8Array(8));
  new DataView(m.buffer).setUint32(0, 200, true);
  assert.throws(() => parseMessages(m), /malformed netlink message/);
});

/** An NLMSG_ERROR as the kernel sends it with NETLINK_CAP_ACK and NETLINK_EXT_ACK. */
function errorMessage(errno: number, reqType: number, seq: number, extack?: string) {
  const b = new MessageBuilder(0, 0);
  b.i32(-errno);
  // the echoed request header (capped)
  b.u32(32).u16(reqType).u16(NLM_F_REQUEST).u32(seq).u32(0);
  if (extack) {
    b.attrString(NLMSGERR_ATTR_MSG, extack);
    b.attrU32(NLMSGERR_ATTR_OFFS, 20);
  }
  const payload = b.finish(0).slice(16);
  const flags = NLM_F_CAPPED | (extack ? NLM_F_ACK_TLVS : 0);
  return parseMessages(rawMessage(NLMSG_ERROR, flags, seq, payload))[0];
}

Deno.test("parseErrorMessage reads an ack as errno 0", () => {
  const e = parseErrorMessage(errorMessage(0, RTM.NEWADDR, 9));
  assert.deepEqual(e, { errno: 0, requestType: RTM.NEWADDR, requestSeq: 9 });
});

Deno.test("parseErrorMessage reads errno and the extended-ack text", () => {
  const e = parseErrorMessage(errorMessage(17, RTM.NEWLINK, 3, "Address already assigned"));
  assert.equal(e.errno, 17);
  assert.equal(e.requestType, RTM.NEWLINK);
  assert.equal(e.requestSeq, 3);
  assert.equal(e.extack, "Address already assigned");
});

Deno.test("parseErrorMessage skips a full echoed request when not capped", () => {
  const req = new MessageBuilder(RTM.NEWROUTE, 0).u32(1).u32(2).u32(3).attrU32(1, 5).finish(8);
  const b = new MessageBuilder(0, 0).i32(-22).bytes(req).attrString(NLMSGERR_ATTR_MSG, "bad");
  const payload = b.finish(0).slice(16);
  const msg = parseMessages(rawMessage(NLMSG_ERROR, NLM_F_ACK_TLVS, 8, payload))[0];
  const e = parseErrorMessage(msg);
  assert.equal(e.errno, 22);
  assert.equal(e.requestType, RTM.NEWROUTE);
  assert.equal(e.extack, "bad");
});
