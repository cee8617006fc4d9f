/**
 * The plugin's logger: one line per event to a log file (config `logFile`) or to stderr,
 * never to stdout, which carries the CNI result. Synchronous and dependency-free: the
 * plugin lives for one invocation.
 *
 * @module
 */
import { LOG_LEVELS, type LogLevel } from "./config.ts";
import { CniError, ErrorCode } from "./errors.ts";
import { cString, libc, O_CLOEXEC, O_WRONLY } from "../base/libc.ts";
import { fdStat, S_IFMT, S_IFREG } from "./fd_info.ts";

/** Writes log lines at or above a level. */
export interface PluginLogger {
  error(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
  /** Like `debug`, but only into the log file: nothing reaches stderr. */
  debugToFile(msg: string, fields?: Record<string, unknown>): void;
  /** Closes the log file, if one was opened. */
  close(): void;
}

const encoder = new TextEncoder();

const O_APPEND = 0o2000;
const O_CREAT = 0o100;
const O_NONBLOCK = 0o4000;
const O_NOCTTY = 0o400;

function describeKind(info: Deno.FileInfo): string | undefined {
  if (info.isFile) return undefined;
  if (info.isDirectory) return "a directory";
  if (info.isFifo) return "a FIFO";
  if (info.isSocket) return "a unix socket";
  if (info.isCharDevice || info.isBlockDevice) return "a device";
  return "not a regular file";
}

/**
 * Refuses (code 7, naming `field`) a log file path that exists and is not a regular file:
 * opening a FIFO for writing would block until a reader comes, a directory or socket
 * cannot be written, and a device is not a log. A missing file is fine (it is created).
 */
export function checkLogFile(path: string | undefined, field: string): void {
  if (path === undefined) return;
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch {
    return; // created on first write; a directory that is missing falls back to stderr
  }
  const kind = describeKind(info);
  if (kind) {
    throw new CniError(
      ErrorCode.INVALID_CONFIG,
      `invalid network configuration: ${field} ${path} is ${kind}, not a regular file`,
      `point ${field} at a regular file (it is created when missing), or remove ${field} ` +
        "to log to stderr",
    );
  }
}

/**
 * Opens the log file for appending without ever blocking (O_NONBLOCK: a FIFO put there
 * after the check fails at once instead of waiting for a reader); anything that turns out
 * not to be a regular file is closed again. Returns the fd or undefined.
 */
function openLogFd(path: string): number | undefined {
  const c = libc();
  const flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  const fd = c.open(cString(path), flags, 0o600);
  if (fd < 0) return undefined;
  const st = fdStat(fd);
  if (!st || (st.mode & S_IFMT) !== S_IFREG) {
    c.close(fd);
    return undefined;
  }
  return fd;
}

/**
 * Makes a logger. Lines go to `logFile` (appended, created 0600) or stderr; a log file that
 * cannot be opened falls back to stderr rather than failing the pod.
 */
export function createLogger(
  opts: { logFile?: string; logLevel: LogLevel; context?: Record<string, unknown> },
): PluginLogger {
  const max = LOG_LEVELS.indexOf(opts.logLevel);
  let fd: number | undefined;
  let fileFailed = false;
  const line = (level: LogLevel, msg: string, fields?: Record<string, unknown>) =>
    encoder.encode(
      JSON.stringify({ ts: new Date().toISOString(), level, msg, ...opts.context, ...fields }) +
        "\n",
    );
  const toFile = (bytes: Uint8Array): boolean => {
    if (!opts.logFile || fileFailed) return false;
    fd ??= openLogFd(opts.logFile);
    if (fd === undefined) {
      fileFailed = true;
      return false;
    }
    let off = 0;
    while (off < bytes.length) {
      const n = Number(libc().write(fd, bytes.subarray(off), BigInt(bytes.length - off)));
      if (n <= 0) {
        fileFailed = true;
        return off > 0; // a half-written line is not repeated on stderr
      }
      off += n;
    }
    return true;
  };
  const write = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (LOG_LEVELS.indexOf(level) > max) return;
    const bytes = line(level, msg, fields);
    if (!toFile(bytes)) Deno.stderr.writeSync(bytes);
  };
  return {
    error: (m, f) => write("error", m, f),
    warn: (m, f) => write("warn", m, f),
    info: (m, f) => write("info", m, f),
    debug: (m, f) => write("debug", m, f),
    debugToFile: (m, f) => {
      if (LOG_LEVELS.indexOf("debug") <= max) toFile(line("debug", m, f));
    },
    close: () => {
      if (fd !== undefined) libc().close(fd);
      fd = undefined;
      fileFailed = true;
    },
  };
}
