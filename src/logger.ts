import { pino, type Logger } from "pino";
import pretty from "pino-pretty";
import sonicBoom, { type SonicBoom } from "sonic-boom";

// sonic-boom is CommonJS whose module.exports is the class; its types describe it as a named export.
const SonicBoomClass = sonicBoom as unknown as typeof SonicBoom;

/** Paths that may carry secrets; pino replaces their values before a line is written. */
const redactPaths = [
  "req.headers['x-api-key']",
  "req.headers.authorization",
  "req.headers.cookie",
  "headers['x-api-key']",
  "headers.authorization",
  "config",
  "*.config",
  "secret",
  "*.secret",
  "apiKey",
  "*.apiKey",
  "password",
  "*.password",
];

/** A provider callback's path token is its only credential: request lines show the route, not the token. */
export function redactCallbackToken(url: string): string {
  return url.replace(/^(\/callbacks\/[^/]+\/)[^/?]+/, "$1[redacted]");
}

/**
 * JSON lines, one per event. `destination` lets tests read the lines the gateway really writes;
 * `pretty` (development with a terminal attached) prints them readably instead.
 */
export function createLogger(level: string, destination?: { write(line: string): void }, format: { pretty?: boolean } = {}): Logger {
  const options = {
    level,
    redact: { paths: redactPaths, censor: "[redacted]" },
    serializers: {
      req: (req: { method?: string; url?: string; hostname?: string; remoteAddress?: string; remotePort?: number }) => ({
        method: req.method,
        url: req.url === undefined ? undefined : redactCallbackToken(req.url),
        hostname: req.hostname,
        remoteAddress: req.remoteAddress,
        remotePort: req.remotePort,
      }),
    },
  };
  // Asynchronous stdout, and no synchronous flush at exit: with either, a full pipe nobody reads blocks
  // the process (requests, the shutdown handler, even process.exit). Lines queue in memory instead, and
  // a forced exit may lose the last of them. (pino.destination() registers exactly such a flush.)
  // minLength 1 still writes each line at once, and makes flush(cb) wait until queued lines are written.
  if (format.pretty && !destination) return pino(options, pretty({ colorize: true, translateTime: "HH:MM:ss.l", ignore: "pid,hostname" }));
  return pino(options, destination ?? new SonicBoomClass({ fd: 1, sync: false, minLength: 1 }));
}

export type { Logger };
