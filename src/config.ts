import { z } from "zod";

/** Every environment variable the gateway reads, parsed and validated once at startup. */
const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

const optionalString = z
  .string()
  .trim()
  .transform((v) => (v === "" ? undefined : v))
  .optional();

const envSchema = z.object({
  NODE_ENV: z.enum(["development", "production", "test"]).default("development"),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().trim().min(1).default("0.0.0.0"),
  PUBLIC_BASE_URL: optionalString.pipe(z.url({ protocol: /^https?$/ }).optional()),
  DATABASE_URL: optionalString.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL")
      .optional(),
  ),
  DATA_DIR: z.string().trim().min(1).default("./data"),
  REDIS_URL: optionalString.pipe(
    z
      .string()
      .regex(/^rediss?:\/\//, "must be a redis:// or rediss:// URL")
      .optional(),
  ),
  LOG_LEVEL: z.enum(logLevels).optional(),
  ENCRYPTION_KEY: optionalString.pipe(
    z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, "must be 64 hexadecimal characters (32 bytes)")
      .optional(),
  ),
});

export interface Config {
  nodeEnv: "development" | "production" | "test";
  port: number;
  host: string;
  /** Base of every URL the gateway hands out (checkout pages, provider callbacks); no trailing slash. */
  publicBaseUrl: string;
  databaseUrl: string | undefined;
  dataDir: string;
  redisUrl: string | undefined;
  logLevel: (typeof logLevels)[number];
  /** 32-byte key for provider credentials; when unset the embedded default keeps one in DATA_DIR. */
  encryptionKey: Buffer | undefined;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`Invalid configuration: ${problems.join("; ")}`);
  }
  const e = parsed.data;
  if (e.DATABASE_URL && !e.ENCRYPTION_KEY) {
    // Instances sharing one PostgreSQL must share the key; a per-machine key file would split them.
    throw new ConfigError(
      "Invalid configuration: ENCRYPTION_KEY is required with DATABASE_URL (generate one with: openssl rand -hex 32)",
    );
  }
  return {
    nodeEnv: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ""),
    databaseUrl: e.DATABASE_URL,
    dataDir: e.DATA_DIR,
    redisUrl: e.REDIS_URL,
    logLevel: e.LOG_LEVEL ?? (e.NODE_ENV === "test" ? "warn" : "info"),
    encryptionKey: e.ENCRYPTION_KEY ? Buffer.from(e.ENCRYPTION_KEY, "hex") : undefined,
  };
}
