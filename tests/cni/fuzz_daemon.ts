/**
 * The IPAM stand-in (tests/helpers/ipam_standin.ts) in a worker of its own, for the fuzz
 * test: the plugin's daemon round trip is a blocking call on the test's own thread, so a
 * stand-in served from that thread could never answer it. Messages: `start` (the stand-in's
 * options), `reservations` (answers the held attachment keys and addresses), `close`.
 *
 * @module
 */
/// <reference lib="deno.worker" />
import {
  type IpamStandin,
  type StandinOptions,
  startIpamStandin,
} from "../helpers/ipam_standin.ts";

let standin: IpamStandin | undefined;

self.onmessage = async (e: MessageEvent<{ op: string; opts?: StandinOptions }>) => {
  switch (e.data.op) {
    case "start":
      standin = startIpamStandin(e.data.opts!);
      self.postMessage({ op: "start" });
      break;
    case "reservations":
      self.postMessage({
        op: "reservations",
        held: [...standin!.reservations.entries()].map(([k, a]) => `${k}=${a.ip}`).sort(),
      });
      break;
    case "close":
      await standin?.close();
      self.postMessage({ op: "close" });
      break;
  }
};
