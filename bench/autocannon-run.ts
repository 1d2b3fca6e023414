/**
 * bench/http.ts's fixed-rate load in its own process: autocannon's API with the options given as one JSON argument,
 * printing { rps, p50, p99, errors } (latencies in ms, errors: non-2xx and failed requests). Through the API rather
 * than autocannon's command line because the command line cannot take a header holding `[<id>]` (its argument
 * parser reads the brackets as a sub-argument list): with `idReplacement`, every request gets a fresh id there,
 * i.e. its own Idempotency-Key.
 *
 *   node --import tsx bench/autocannon-run.ts '{"url":"http://127.0.0.1:3000/health","overallRate":100,"duration":5}'
 */
import autocannon from "autocannon";

const options = JSON.parse(process.argv[2]!) as Record<string, unknown>;
// method, body and idReplacement are passed through as autocannon takes them (bench/autocannon.d.ts types only the rest).
const instance = autocannon({ connections: 32, ...options } as unknown as Parameters<typeof autocannon>[0]);
instance.on("done", (result) => {
  process.stdout.write(`${JSON.stringify({ rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.non2xx + result.errors })}\n`);
});
