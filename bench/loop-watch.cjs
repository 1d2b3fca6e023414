// bench/tail-probe.ts preloads this into the gateway (node --require):  event-loop blocks of 25 ms or more and GC pauses of 5 ms or more, with epoch times, to a file.
const fs = require("node:fs");
const { PerformanceObserver, performance } = require("node:perf_hooks");
const out = fs.openSync(process.env.LOOPWATCH_FILE || `${require("node:os").tmpdir()}/loop-watch-${process.pid}.log`, "a");
let last = Date.now();
setInterval(() => {
  const now = Date.now();
  if (now - last >= 25) fs.writeSync(out, `block ${last} ${now - last}\n`);
  last = now;
}, 5).unref();
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (e.duration >= 5) fs.writeSync(out, `gc ${Math.round(performance.timeOrigin + e.startTime)} ${e.duration.toFixed(1)} kind=${e.detail?.kind}\n`);
}).observe({ entryTypes: ["gc"] });
