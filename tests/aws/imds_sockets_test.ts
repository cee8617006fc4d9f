/**
 * The IMDS client over many reads against the simulator: answers that are not 200 (a 404 of
 * an optional key, which a node without prefixes gets for every ENI on every IMDS check)
 * must not leave their connection open, or a long-running daemon runs out of descriptors.
 */
import assert from "node:assert/strict";
import { startSim } from "../../aws/sim/mod.ts";
import { ImdsClient } from "../../aws/imds.ts";
import { INSTANCE, standardScenario } from "../ipam/harness.ts";

const openDescriptors = () => [...Deno.readDirSync("/proc/self/fd")].length;

Deno.test("200 IMDS reads, half of them 404s, leave no connection open", async () => {
  const sim = await startSim({ scenario: standardScenario() });
  try {
    const imds = new ImdsClient({ endpoint: sim.imdsEndpointFor(INSTANCE) });
    await imds.listMacs(); // token and first connection
    const before = openDescriptors();
    for (let i = 0; i < 100; i++) {
      assert.equal(await imds.get("no-such-key", true), undefined);
      assert.equal((await imds.listMacs()).length, 1);
    }
    const grown = openDescriptors() - before;
    assert.ok(grown < 10, `descriptors grew by ${grown} over 200 reads`);
  } finally {
    await sim.close();
  }
});
