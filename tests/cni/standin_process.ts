/**
 * The IPAM stand-in with the daemon's CNI service (tests/helpers/ipam_standin.ts) as a process
 * of its own, for tests that kill it with SIGKILL or run it in a mount namespace of its own.
 * Options are the stand-in's, as JSON in the first argument; a second argument is a file that
 * gets each request it answers, one JSON line each. Prints `ready` once it listens, then
 * serves until killed.
 *
 * @module
 */
import { type StandinOptions, startIpamStandin } from "../helpers/ipam_standin.ts";

const opts = JSON.parse(Deno.args[0]) as StandinOptions;
const requestLog = Deno.args[1];
await startIpamStandin({
  ...opts,
  onRequest: requestLog === undefined
    ? undefined
    : (req) => Deno.writeTextFileSync(requestLog, `${JSON.stringify(req)}\n`, { append: true }),
}).netnsFds;
console.log("ready");
