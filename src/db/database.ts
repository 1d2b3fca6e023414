import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm";
import { PrismaPg } from "@prisma/adapter-pg";
import type { SqlDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import pg from "pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import { lockDataDir } from "./data-dir-lock.ts";
import { makeDataDirPrivate, restrictDataDir } from "./data-dir-permissions.ts";
import { PrismaClient, type Prisma } from "./generated/prisma/client.ts";
import { applyMigrations, type SqlConnection } from "./migrate.ts";
import { openReadReplicas, type ReadStats } from "./replicas.ts";
import { pgliteSql, poolSql, type Sql, type TransactionalSql } from "./sql.ts";

export type { PrismaClient, Sql };

/** Where a store's statement runs: the gateway's client, or the caller's interactive transaction. */
export type Db = PrismaClient | Prisma.TransactionClient;
export type Backend = "pglite" | "postgres";

export interface Database {
  prisma: PrismaClient;
  /** Plain SQL on the same connections, for the hottest statements only (see sql.ts). */
  sql: TransactionalSql;
  backend: Backend;
  /**
   * Where reads that may lag a little go: lists, reports (CSV exports), dashboards' figures. A read replica in
   * rotation (DATABASE_READ_URL, src/db/replicas.ts), else the primary; on PGlite or without replicas, simply
   * `prisma` and `sql` above. Reads only, never in a transaction: anything that must see its own writes (verify,
   * idempotency, keys, mutations, jobs) uses the primary.
   */
  read: { prisma: PrismaClient; sql: Sql };
  /** The replicas' state, lag and reads, and the reads the primary took over (metrics); unset without replicas. */
  readStats?: () => ReadStats;
  /** The PostgreSQL pool's use (metrics); PGlite has a single in-process connection and none. */
  poolStats?: () => { total: number; idle: number; waiting: number };
  /** Throws when the database cannot answer. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The reader (Database.read): given to the services for their lists, reports and dashboards' figures. */
export type Reader = Database["read"];

export interface OpenOptions {
  /** Apply pending migrations before returning (startup and `db deploy` do; nothing else needs to). */
  migrate?: boolean;
  /** Called with every SQL statement Prisma sends (tests count them to catch N+1 queries). */
  onQuery?: (sql: string) => void;
  /**
   * Called with the text and parameters of every statement sent on the PostgreSQL primary's pool, Prisma's and the plain
   * SQL alike, as pg sends them (test/postgres/explain-hot-paths.test.ts EXPLAINs them). Tests only; PostgreSQL only.
   */
  onStatement?: (text: string, values: readonly unknown[]) => void;
  poolSize?: number;
}

type DbConfig = Pick<Config, "databaseUrl" | "dataDir"> & Partial<Pick<Config, "readReplicas" | "databasePoolSize">>;

export async function openDatabase(config: DbConfig, logger: Logger, options: OpenOptions = {}): Promise<Database> {
  return config.databaseUrl
    ? openPostgres(config.databaseUrl, config.readReplicas, logger, { poolSize: config.databasePoolSize, ...options })
    : openPglite(config.dataDir, logger, options);
}

function createClient(adapter: SqlDriverAdapterFactory, options: OpenOptions): PrismaClient {
  const { onQuery } = options;
  if (!onQuery) return new PrismaClient({ adapter });
  const client = new PrismaClient({ adapter, log: [{ emit: "event", level: "query" }] });
  client.$on("query", (e) => onQuery(e.query));
  return client as unknown as PrismaClient;
}

async function openPostgres(url: string, readConfig: Config["readReplicas"] | undefined, logger: Logger, options: OpenOptions): Promise<Database> {
  if (options.migrate) {
    // Migrations get their own connection: the advisory lock lives and dies with it.
    const conn = new pg.Client({ connectionString: url });
    await conn.connect();
    try {
      const applied = await applyMigrations({
        query: async (sql, params) => (await conn.query(sql, params)).rows,
        exec: async (script) => {
          await conn.query(script);
        },
      });
      if (applied.length) logger.info({ applied }, "applied database migrations");
    } finally {
      await conn.end();
    }
  }
  // One pool for Prisma and the plain statements, so the pool size bounds both.
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 10 });
  // An idle connection the server dropped must not crash the process; the next checkout reconnects.
  pool.on("error", (error) => logger.warn({ err: error }, "idle database connection lost"));
  if (options.onStatement) recordStatements(pool, options.onStatement);
  const prisma = createClient(new PrismaPg(pool), options);
  await prisma.$connect();
  const sql = poolSql(pool, options.onQuery);
  const replicas = readConfig?.urls.length
    ? await openReadReplicas(pool, { urls: readConfig.urls, maxLagMs: readConfig.maxLagMs, poolSize: options.poolSize ?? 10 }, logger)
    : undefined;
  const reader = replicas ? createClient(new PrismaPg(replicas.pool), options) : undefined;
  await reader?.$connect();
  return {
    prisma,
    sql,
    read: replicas && reader ? { prisma: reader, sql: poolSql(replicas.pool, options.onQuery, "read") } : { prisma, sql },
    readStats: replicas?.stats,
    backend: "postgres",
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    ping: async () => {
      await prisma.$queryRawUnsafe("SELECT 1");
    },
    close: async () => {
      await reader?.$disconnect();
      await replicas?.close();
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

/** Every connection of the pool reports each statement it sends (OpenOptions.onStatement). */
function recordStatements(pool: pg.Pool, onStatement: (text: string, values: readonly unknown[]) => void) {
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((config: string | { text: string; values?: unknown[] }, values?: unknown, ...rest: unknown[]) => {
      const text = typeof config === "string" ? config : config.text;
      onStatement(text, Array.isArray(values) ? values : typeof config === "string" ? [] : (config.values ?? []));
      return query(config, values, ...rest);
    }) as typeof client.query;
  });
}

async function openPglite(dataDir: string, logger: Logger, options: OpenOptions): Promise<Database> {
  // Owner-only before the lock file or any database file is written (src/db/data-dir-permissions.ts).
  const corrected = makeDataDirPrivate(dataDir);
  if (corrected > 0) logger.info({ dataDir, corrected }, `DATA_DIR: ${corrected} entries other users could read or change were made owner-only (0700/0600)`);
  const lock = lockDataDir(dataDir);
  let pglite: PGlite | undefined;
  try {
    // pg_trgm: the customers' search has trigram indexes (PostgreSQL has the extension in contrib).
    pglite = await PGlite.create(join(dataDir, "pglite"), { extensions: { pg_trgm } });
    if (options.migrate) {
      const db = pglite;
      const conn: SqlConnection = {
        query: async <T,>(sql: string, params?: unknown[]) => (await db.query<T>(sql, params)).rows,
        exec: async (script) => {
          await db.exec(script);
        },
      };
      const applied = await applyMigrations(conn);
      if (applied.length) logger.info({ applied }, "applied database migrations");
    }
    // PGlite writes some files with modes of its own (0666 when it creates the database), whatever the umask.
    restrictDataDir(dataDir);
    const prisma = createClient(new PrismaPGlite(pglite), options);
    await prisma.$connect();
    const db = pglite;
    const sql = pgliteSql(db, options.onQuery);
    return {
      prisma,
      sql,
      read: { prisma, sql },
      backend: "pglite",
      ping: async () => {
        await db.query("SELECT 1");
      },
      close: async () => {
        try {
          await prisma.$disconnect();
          await db.close();
          restrictDataDir(dataDir);
        } finally {
          lock.release();
        }
      },
    };
  } catch (error) {
    await pglite?.close().catch(() => {});
    lock.release();
    throw error;
  }
}
