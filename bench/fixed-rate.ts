/**
 * A fixed-rate HTTP load in its own process (autocannon's API), stopped by SIGINT: the API traffic of a working day
 * rather than a flood, so a bench measures the latency its own work adds, not CPU starvation. Prints one JSON line:
 * { requests, rps, p50, p99, errors } (latencies in ms, errors: non-2xx and failed requests).
 *
 *   node bench/fixed-rate.ts <url> --rate 500 --connections 8 --seconds 1200 [--header "x-api-key: ..."]
 */
import autocannon from "autocannon";

const argument = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};

const url = process.argv[2]!;
const headers = Object.fromEntries(
  process.argv.flatMap((arg, i) => (process.argv[i - 1] === "--header" ? [arg.split(/:\s*/, 2) as [string, string]] : [])),
);
const instance = autocannon({
  url,
  headers,
  connections: Number(argument("--connections") ?? 8),
  overallRate: Number(argument("--rate") ?? 500),
  duration: Number(argument("--seconds") ?? 60),
});
process.once("SIGINT", () => instance.stop());
instance.on("done", (result) => {
  process.stdout.write(
    `${JSON.stringify({ requests: result.requests.total, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.non2xx + result.errors })}\n`,
  );
});
