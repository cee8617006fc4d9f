/**
 * Structured logs: JSON lines with levels on stderr (the daemon's stdout stays unused), via
 * @logtape/logtape under the category `vpcni.ipam`.
 *
 * @module
 */
import { configure, getLogger, jsonLinesFormatter, type Logger, reset } from "@logtape/logtape";

/** The daemon's logger (records go nowhere until {@linkcode setupLogging} runs). */
export const log: Logger = getLogger(["vpcni", "ipam"]);

const encoder = new TextEncoder();

/** Sends records at `level` and above to stderr as JSON lines. */
export async function setupLogging(level: "debug" | "info" | "warning" | "error"): Promise<void> {
  await reset();
  await configure({
    sinks: {
      stderr: (record) => {
        let line = jsonLinesFormatter(record);
        if (!line.endsWith("\n")) line += "\n";
        try {
          Deno.stderr.writeSync(encoder.encode(line));
        } catch {
          // stderr gone (the supervisor closed it): nothing sensible is left to do.
        }
      },
    },
    loggers: [
      { category: ["vpcni"], lowestLevel: level, sinks: ["stderr"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: ["stderr"] },
    ],
  });
}
