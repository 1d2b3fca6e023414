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

export function createLogger(level: string): Logger {
  return pino({ level, redact: { paths: redactPaths, censor: "[redacted]" } });
}

export type { Logger };
