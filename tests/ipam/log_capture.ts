/**
 * Captures the in-process daemon's log as the JSON lines `vpcni serve` writes to stderr
 * (ipam/log.ts's formatter), so a test can assert that a failure was logged and how.
 *
 * @module
 */
import { configure, jsonLinesFormatter, reset } from "@logtape/logtape";

/** A running capture: the lines so far, parsed, and a way to stop. */
export interface LogCapture {
  /** Every record so far as the JSON object of its line. */
  records(): Record<string, unknown>[];
  /** Stops capturing (the daemon's log goes nowhere again). */
  stop(): Promise<void>;
}

/** Starts capturing the `vpcni` loggers at every level. */
export async function captureLog(): Promise<LogCapture> {
  const lines: string[] = [];
  await configure({
    reset: true,
    sinks: { memory: (record) => void lines.push(jsonLinesFormatter(record)) },
    loggers: [
      { category: ["vpcni"], lowestLevel: "debug", sinks: ["memory"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: ["memory"] },
    ],
  });
  return {
    records: () => lines.map((l) => JSON.parse(l)),
    stop: () => reset(),
  };
}
