/** The part of autocannon's programmatic API bench/fixed-rate.ts uses (the package ships no types). */
declare module "autocannon" {
  interface Result {
    requests: { total: number; average: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
  }
  interface Instance {
    stop(): void;
    on(event: "done", listener: (result: Result) => void): void;
  }
  interface Options {
    url: string;
    headers?: Record<string, string>;
    connections?: number;
    overallRate?: number;
    duration?: number;
  }
  export default function autocannon(options: Options): Instance;
}
