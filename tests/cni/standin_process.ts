/**
 * The IPAM stand-in with the daemon's CNI service (tests/helpers/ipam_standin.ts) as a process
 * of its own, for tests that kill it with SIGKILL. Options are the stand-in's, as JSON in the
 * first argument; prints `ready` once it listens, then serves until killed.
 *
 * @module
 */
import { type StandinOptions, startIpamStandin } from "../helpers/ipam_standin.ts";

const opts = JSON.parse(Deno.args[0]) as StandinOptions;
startIpamStandin(opts);
console.log("ready");
