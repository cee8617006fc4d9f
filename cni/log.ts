/**
 * The plugin's logger: one line per event to a log file (config `logFile`) or to stderr,
 * never to stdout, which carries the CNI result. Synchronous and dependency-free: the
 * plugin lives for one invocation.
 *
 * @module
 */
import { LOG_LEVELS, type LogLevel } from "./config.ts";

/** Writes log lines at or above a level. */
export interface PluginLogger {
  error(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
}

const encoder = new TextEncoder();

/**
 * Makes a logger. Lines go to `logFile` (appended, created 0600) or stderr; a log file that
 * cannot be opened falls back to stderr rather than failing the pod.
 */
export function createLogger(
  opts: { logFile?: string; logLevel: LogLevel; context?: Record<string, unknown> },
): PluginLogger {
  const max = LOG_LEVELS.indexOf(opts.logLevel);
  let file: Deno.FsFile | undefined;
  let fileFailed = false;
  const write = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(level) > max) return;
    const line = JSON.stringify({
      ts: new Date().toISOString(),
      level,
      msg,
      ...opts.context,
      ...fields,
    }) + "\n";
    const bytes = encoder.encode(line);
    if (opts.logFile && !fileFailed) {
      try {
        file ??= Deno.openSync(opts.logFile, { append: true, create: true, mode: 0o600 });
        file.writeSync(bytes);
        return;
      } catch {
        fileFailed = true;
      }
    }
    Deno.stderr.writeSync(bytes);
  };
  return {
    error: (m, f) => write("error", m, f),
    warn: (m, f) => write("warn", m, f),
    info: (m, f) => write("info", m, f),
    debug: (m, f) => write("debug", m, f),
  };
}
