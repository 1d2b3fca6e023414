import { pino, type Logger } from "pino";

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

/** `destination` lets tests read the lines the gateway really writes. */
export function createLogger(level: string, destination?: { write(line: string): void }): Logger {
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
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
