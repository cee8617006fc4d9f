import assert from "node:assert/strict";
import * as msg from "./messages.ts";
import { MessageWriter, readFields, WireError } from "./wire.ts";

const hex = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
const ascii = (s: string) => hex(new TextEncoder().encode(s));

Deno.test("wire: a RegisterRequest is laid out by the API's field numbers", () => {
  const b = msg.encodeRegisterRequest({
    version: "v1beta1",
    endpoint: "e.sock",
    resourceName: "vpcni.io/a",
    options: { preStartRequired: false, getPreferredAllocationAvailable: false },
  });
  // field 1 (0x0a) "v1beta1", field 2 (0x12) "e.sock", field 3 (0x1a) the name, field 4 (0x22)
  // an empty options message (false bools are not written).
  assert.equal(
    hex(b),
    "0a07" + ascii("v1beta1") + "1206" + ascii("e.sock") + "1a0a" + ascii("vpcni.io/a") + "2200",
  );
  assert.deepEqual(msg.decodeRegisterRequest(b), {
    version: "v1beta1",
    endpoint: "e.sock",
    resourceName: "vpcni.io/a",
    options: { preStartRequired: false, getPreferredAllocationAvailable: false },
  });
});

Deno.test("wire: device lists and allocate requests round-trip", () => {
  const devices = [{ id: "a-0", health: "Healthy" }, { id: "a-1", health: "Healthy" }];
  assert.deepEqual(msg.decodeDeviceList(msg.encodeDeviceList(devices)), devices);
  assert.deepEqual(msg.decodeDeviceList(msg.encodeDeviceList([])), []);
  const req = [["a-0"], ["a-1", "a-2"]];
  assert.deepEqual(msg.decodeAllocateRequest(msg.encodeAllocateRequest(req)), req);
  assert.equal(msg.decodeAllocateResponse(msg.encodeAllocateResponse(2)), 2);
});

Deno.test("wire: pod-resources answers keep devices and skip CPUs, memory and unknown fields", () => {
  const pod = {
    name: "web-0",
    namespace: "shop",
    containers: [{
      name: "app",
      devices: [
        { resourceName: "vpcni.io/internal", deviceIds: ["internal-3"] },
        { resourceName: "example.com/gpu", deviceIds: ["g0", "g1"] },
      ],
    }],
  };
  const plain = msg.encodePodResources(pod);
  // What a kubelet adds: packed cpu_ids (4), a memory entry (5), a fixed64 field a newer
  // kubelet might send (99), inside the pod and inside the container.
  const container = new MessageWriter().string(1, "app")
    .message(
      2,
      new MessageWriter().string(1, "vpcni.io/internal").strings(2, ["internal-3"]).finish(),
    )
    .message(3, Uint8Array.of(2, 4))
    .finish();
  const withExtras = new MessageWriter().string(1, "web-0").string(2, "shop")
    .message(3, container)
    .message(4, Uint8Array.of(1, 2, 3))
    .message(5, new MessageWriter().string(1, "memory").int(2, 1 << 30).finish())
    .finish();
  const fixed = Uint8Array.of((99 << 3 | 1) & 0x7f | 0x80, 99 >> 4, 1, 2, 3, 4, 5, 6, 7, 8);
  const got = msg.decodePodResources(new Uint8Array([...withExtras, ...fixed]));
  assert.deepEqual(got, {
    name: "web-0",
    namespace: "shop",
    containers: [{
      name: "app",
      devices: [{ resourceName: "vpcni.io/internal", deviceIds: ["internal-3"] }],
    }],
  });
  assert.deepEqual(msg.decodeListPodsResponse(msg.encodeListPodsResponse([pod, pod])), [pod, pod]);
  assert.deepEqual(msg.decodeGetPodResponse(msg.encodeGetPodResponse(pod)), pod);
  assert.equal(msg.decodeGetPodResponse(new Uint8Array(0)), undefined);
  assert.deepEqual(msg.decodePodResources(plain), pod);
  assert.deepEqual(msg.decodeGetPodRequest(msg.encodeGetPodRequest("ns", "p")), {
    namespace: "ns",
    name: "p",
  });
});

Deno.test("wire: allocatable devices decode; packed and unpacked CPU ids both read", () => {
  const dev = { resourceName: "vpcni.io/a", deviceIds: ["a-0", "a-1"] };
  const packed = new MessageWriter().message(1, msg.encodeAllocatable([dev]).subarray(2))
    .message(2, Uint8Array.of(0, 1, 0x80, 0x01)).finish();
  assert.deepEqual(msg.decodeAllocatable(packed), { devices: [dev], cpuIds: [0, 1, 128] });
  const unpacked = new MessageWriter().int(2, 3).int(2, 5).finish();
  assert.deepEqual(msg.decodeAllocatable(unpacked).cpuIds, [3, 5]);
});

Deno.test("wire: truncated or malformed input is an error, not garbage", () => {
  const b = msg.encodeRegisterRequest({ version: "v1beta1", endpoint: "x", resourceName: "y" });
  assert.throws(() => readFields(b.subarray(0, 5)), WireError);
  assert.throws(() => readFields(Uint8Array.of(0x08, 0x80)), /truncated varint/);
  assert.throws(() => readFields(Uint8Array.of(0x0b)), /wire type 3/);
  assert.throws(() => readFields(Uint8Array.of(0x00, 0x01)), /field number 0/);
  assert.throws(() => msg.decodeDeviceList(Uint8Array.of(0x08, 0x01)), /expected a message/);
  const negative = new MessageWriter().int(1, -1).finish();
  assert.equal(negative.length, 11, "a negative int64 takes ten bytes after its tag");
});
