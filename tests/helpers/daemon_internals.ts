/**
 * What an in-process IPAM daemon holds, for tests that compare its memory with EC2 or break
 * its state on purpose. The daemon keeps these inside its pools; this is the one place the
 * tests reach in for them.
 *
 * @module
 */
import type { RunningDaemon } from "../../ipam/daemon.ts";
import type { TrackedCloud } from "../../ipam/ec2_sync.ts";
import type { NodeState } from "../../ipam/node_state.ts";

/** The daemon's node state and its EC2 client (which counts the mutating calls in flight). */
export interface DaemonInternals {
  state: NodeState;
  cloud: TrackedCloud;
}

/** The node state and EC2 client of a daemon running in this process. */
export function daemonInternals(daemon: RunningDaemon): DaemonInternals {
  return {
    state: daemon.pools.growth.ctx.state,
    cloud: daemon.pools.growth.ctx.cloud as TrackedCloud,
  };
}
