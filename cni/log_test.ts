import assert from "node:assert/strict";
import { checkLogFile, createLogger } from "./log.ts";
import { CniError } from "./errors.ts";

Deno.test("a logFile that is a FIFO, directory, socket or device is refused with code 7", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-log-" });
  const fifo = `${dir}/fifo`;
  await new Deno.Command("mkfifo", { args: [fifo] }).output();
  const listener = Deno.listen({ transport: "unix", path: `${dir}/sock` });
  try {
    const cases: [string, RegExp][] = [
      [fifo, /is a FIFO/],
      [dir, /is a directory/],
      [`${dir}/sock`, /is a unix socket/],
      ["/dev/null", /is a device/],
    ];
    for (const [path, re] of cases) {
      for (const field of ["logFile", "ipam.logFile"]) {
        assert.throws(() => checkLogFile(path, field), (e: unknown) => {
          assert.ok(e instanceof CniError);
          assert.equal(e.code, 7);
          assert.match(e.message, new RegExp(`${field.replace(".", "\\.")} ${path}`));
          assert.match(e.message, re);
          return true;
        });
      }
    }
    checkLogFile(`${dir}/new.log`, "logFile");
    checkLogFile(undefined, "logFile");
  } finally {
    listener.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the logger never blocks on a FIFO that appears after the check", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-log-" });
  const fifo = `${dir}/fifo`;
  await new Deno.Command("mkfifo", { args: [fifo] }).output();
  try {
    // Written to stderr instead: no reader ever comes, so a blocking open would hang here.
    const log = createLogger({ logFile: fifo, logLevel: "error" });
    log.error("vpcni log test line (expected on stderr)");
    log.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a log file gets lines; the stack goes only there, at debug level", async () => {
  const dir = await Deno.makeTempDir({ prefix: "vpcni-log-" });
  try {
    const file = `${dir}/vpcni.log`;
    const warn = createLogger({ logFile: file, logLevel: "warn" });
    warn.error("one");
    warn.debugToFile("hidden", { stack: "x" });
    warn.close();
    const debug = createLogger({ logFile: file, logLevel: "debug" });
    debug.debugToFile("stack of the failure", { stack: "    at f (file:///x.ts:1:1)" });
    debug.close();
    const lines = (await Deno.readTextFile(file)).trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.msg), ["one", "stack of the failure"]);
    assert.equal((await Deno.stat(file)).mode! & 0o777, 0o600);
    const none = createLogger({ logLevel: "debug" });
    none.debugToFile("nowhere"); // no file: nothing, and nothing on stderr either
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
