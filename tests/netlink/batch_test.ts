import assert from "node:assert/strict";
import {
  deleteLink,
  ExistsError,
  listLinks,
  NotFoundError,
  vethRequest,
} from "../../netlink/mod.ts";
import { ipLinks, withSockets } from "./fixture.ts";

Deno.test("requestBatch pipelines many requests and reports each failure in order", async () => {
  await withSockets(1, async (ns) => {
    const requests = [];
    for (let i = 0; i < 150; i++) {
      requests.push({
        message: vethRequest({ name: `vnlq${i}`, peerName: `vnlr${i}` }),
        subject: `vnlq${i}`,
      });
    }
    // Two requests that must fail, in the middle of the batch: a duplicate of an earlier pair
    // and a peer name already taken.
    requests.splice(100, 0, {
      message: vethRequest({ name: "vnlq3", peerName: "vnlx3" }),
      subject: "vnlq3",
    });
    requests.splice(120, 0, {
      message: vethRequest({ name: "vnlz9", peerName: "vnlr9" }),
      subject: "vnlz9",
    });
    const errors = ns.sock.requestBatch(requests);
    assert.equal(errors.length, 2);
    assert.ok(errors[0] instanceof ExistsError);
    assert.match(errors[0].message, /^RTM_NEWLINK vnlq3: File exists/);
    assert.match(errors[1].message, /^RTM_NEWLINK vnlz9: File exists/);
    const names = new Set(listLinks(ns.sock).map((l) => l.name));
    assert.equal(names.size, 1 + 300);
    assert.equal((await ipLinks(ns)).length, 1 + 300);

    // An empty batch is a no-op, and the socket still serves plain requests afterwards.
    assert.deepEqual(ns.sock.requestBatch([]), []);
    deleteLink(ns.sock, "vnlq0");
    assert.throws(() => deleteLink(ns.sock, "vnlq0"), NotFoundError);
  });
});
