const s = Deno.readTextFileSync("/proc/self/status"); console.log("rss", /VmRSS:\s+(\d+)/.exec(s)![1]);
