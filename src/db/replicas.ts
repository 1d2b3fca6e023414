import pg from "pg";
import type { Logger } from "../logger.ts";

/**
 * Read replicas (DATABASE_READ_URL): PostgreSQL streaming standbys that answer the reads allowed to lag a little
 * (lists, reports, dashboards' figures). Everything else stays on the primary (see Database.read).
 *
 * - Which replica: round-robin over those in rotation, one statement at a time (the replicas are alike, and a
 *   statement is short; a slow one shows as lag and leaves rotation).
 * - In rotation: the last check reached it, it is a standby, and its lag is at most maxLagMs. A check runs every
 *   maxLagMs / 4 (at most every second), so a replica's lag is known to that resolution.
 * - Lag, in the gateway's own clock: each check notes the primary's WAL position (pg_current_wal_lsn()); a
 *   replica's lag is how long ago the primary was at a position the replica has not yet replayed
 *   (pg_last_wal_replay_lsn()), 0 when it has replayed all the primary had at this check. An idle primary writes no
 *   WAL, so its replicas read 0, where now() - pg_last_xact_replay_timestamp() would grow with the idle time; and
 *   no heartbeat writes, no table, no clocks of other machines are needed.
 * - A read that fails on a replica for the replica's sake (connection lost, server shutting down or starting,
 *   a conflict with recovery) is run once more on the primary, and a replica that lost its connection leaves
 *   rotation until a check finds it well again. A read the statement itself got wrong fails as it would anywhere.
 */

export type ReplicaState = "ok" | "lagging" | "down";
export const REPLICA_STATES: readonly ReplicaState[] = ["ok", "lagging", "down"];

export interface ReplicaStatus {
  /** host:port of its URL (never the credentials). */
  name: string;
  state: ReplicaState;
  /** The last lag measured; null when the last check did not reach it. */
  lagMs: number | null;
  /** Statements it answered. */
  reads: number;
}

export interface ReadStats {
  replicas: ReplicaStatus[];
  /** Reads the primary answered instead: none in rotation, or retried after a replica failed. */
  fallbacks: { noReplica: number; replicaFailed: number };
}

export interface ReadReplicaOptions {
  urls: string[];
  maxLagMs: number;
  /** Connections per replica. */
  poolSize: number;
  /** How often replicas are checked; by default maxLagMs / 4, at most every second (tests set it to check once). */
  checkEveryMs?: number;
}

export interface ReadReplicas {
  /** For Prisma's adapter and poolSql: each query runs on a replica in rotation, or on the primary. */
  pool: pg.Pool;
  stats(): ReadStats;
  close(): Promise<void>;
}

/** A replica that does not accept a connection within this is treated as down (no waiting on a dead host). */
const CONNECT_TIMEOUT_MS = 2000;
/** How far back the primary's positions are remembered: a lag beyond that reads as at least that. */
const LSN_HISTORY_MS = 60_000;

interface Replica extends ReplicaStatus {
  pool: pg.Pool;
}

/** "16/B374D848" (pg_lsn as text) as a number that compares. */
export function parseLsn(text: string): bigint {
  const [high = "", low = ""] = text.split("/");
  return (BigInt(`0x${high}`) << 32n) | BigInt(`0x${low}`);
}

/** A replica's name for logs and metrics: host and port only. */
export function replicaName(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || "5432"}`;
}

/** The replica's fault rather than the statement's: worth the primary's answer instead. */
function isReplicaFault(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  // No SQLSTATE: the connection failed or was lost (ECONNREFUSED, "Connection terminated", a connect timeout).
  if (typeof code !== "string" || !/^[0-9A-Z]{5}$/.test(code)) return true;
  // 40001 on a standby is a conflict with recovery; 08 connection, 53 resources, 57 shutdown/starting, 58 system.
  return code === "40001" || ["08", "53", "57", "58", "XX"].includes(code.slice(0, 2));
}

/** The pool Prisma's adapter is given (it must be a pg.Pool): it hands each query to the router, transactions to the primary. */
class RoutedPool extends pg.Pool {
  readonly #primary: pg.Pool;
  readonly #route: <T>(work: (pool: pg.Pool) => Promise<T>) => Promise<T>;

  constructor(primary: pg.Pool, route: <T>(work: (pool: pg.Pool) => Promise<T>) => Promise<T>) {
    super(primary.options); // never opens a connection of its own
    this.#primary = primary;
    this.#route = route;
  }

  // The promise forms only (Prisma's adapter and poolSql use nothing else); `any` as pg's overloads declare it.
  override query(...args: any[]): any {
    if (typeof args[args.length - 1] === "function") throw new Error("RoutedPool: callback queries are not supported");
    return this.#route((pool) => (pool.query as (...a: unknown[]) => Promise<unknown>).apply(pool, args));
  }

  /** A client of its own is what a transaction asks for: transactions run on the primary. */
  override connect(...args: any[]): any {
    return (this.#primary.connect as (...a: unknown[]) => unknown).apply(this.#primary, args);
  }
}

export async function openReadReplicas(primary: pg.Pool, options: ReadReplicaOptions, logger: Logger): Promise<ReadReplicas> {
  const { maxLagMs } = options;
  const checkEveryMs = options.checkEveryMs ?? Math.min(1000, Math.max(25, Math.floor(maxLagMs / 4)));
  const replicas: Replica[] = options.urls.map((url) => {
    const replica: Replica = {
      name: replicaName(url),
      pool: new pg.Pool({ connectionString: url, max: options.poolSize, connectionTimeoutMillis: CONNECT_TIMEOUT_MS }),
      state: "down",
      lagMs: null,
      reads: 0,
    };
    // A connection the replica dropped must not crash the process; the router or the next check notices.
    replica.pool.on("error", (error) => logger.warn({ err: error, replica: replica.name }, "idle replica connection lost"));
    return replica;
  });
  const fallbacks = { noReplica: 0, replicaFailed: 0 };

  function setState(replica: Replica, state: ReplicaState, lagMs: number | null, why?: unknown): void {
    const before = replica.state;
    replica.state = state;
    replica.lagMs = lagMs;
    if (before === state) return;
    if (state === "ok") logger.info({ replica: replica.name, lagMs }, "read replica in rotation");
    else logger.warn({ replica: replica.name, state, lagMs, ...(why instanceof Error ? { err: why } : why ? { reason: why } : {}) }, "read replica out of rotation: its reads go to the primary");
  }

  let next = 0;
  function pick(): Replica | undefined {
    for (let i = 0; i < replicas.length; i++) {
      const replica = replicas[(next + i) % replicas.length]!;
      if (replica.state === "ok") {
        next = (next + i + 1) % replicas.length;
        return replica;
      }
    }
    return undefined;
  }

  async function route<T>(work: (pool: pg.Pool) => Promise<T>): Promise<T> {
    const replica = pick();
    if (!replica) {
      fallbacks.noReplica++;
      return work(primary);
    }
    try {
      const result = await work(replica.pool);
      replica.reads++;
      return result;
    } catch (error) {
      if (!isReplicaFault(error)) throw error;
      // A conflict with recovery is one statement's bad luck; anything else means the replica is not well.
      if ((error as { code?: string }).code !== "40001") setState(replica, "down", null, error);
      fallbacks.replicaFailed++;
      return work(primary);
    }
  }

  /** The primary's WAL position at each check, oldest first. */
  const positions: { at: number; lsn: bigint }[] = [];

  /**
   * How long ago the primary was last at a position this replica has replayed (see the top of the file). A replica
   * behind every position remembered is behind by at least the oldest one's age, and maybe far more (just after
   * start, only one position is known): it counts as lagging until it reaches a known position.
   */
  function lagOf(replayed: bigint): { lagMs: number; behindAll: boolean } {
    const now = Date.now();
    for (let i = positions.length - 1; i >= 0; i--) if (positions[i]!.lsn <= replayed) return { lagMs: now - positions[i]!.at, behindAll: false };
    return { lagMs: now - positions[0]!.at, behindAll: true };
  }

  async function checkReplica(replica: Replica): Promise<void> {
    try {
      const { rows } = await replica.pool.query<{ standby: boolean; replayed: string | null }>(
        "SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replayed",
      );
      const row = rows[0]!;
      // A promoted (or wrongly named) server may have parted from the primary's history: not read from.
      if (!row.standby || !row.replayed) return setState(replica, "down", null, "not a standby (pg_is_in_recovery() is false)");
      const { lagMs, behindAll } = lagOf(parseLsn(row.replayed));
      setState(replica, behindAll || lagMs > maxLagMs ? "lagging" : "ok", lagMs);
    } catch (error) {
      setState(replica, "down", null, error);
    }
  }

  async function check(): Promise<void> {
    try {
      const { rows } = await primary.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn");
      const at = Date.now();
      positions.push({ at, lsn: parseLsn(rows[0]!.lsn) });
      while (positions.length > 1 && positions[0]!.at < at - Math.max(LSN_HISTORY_MS, 2 * maxLagMs)) positions.shift();
    } catch (error) {
      // Without the primary's position no lag can be told; the replicas keep their state until it answers again.
      logger.warn({ err: error }, "read replica check: the primary did not answer");
      return;
    }
    await Promise.all(replicas.map(checkReplica));
  }

  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const schedule = () => {
    if (closed) return;
    timer = setTimeout(() => {
      running = check().finally(schedule);
    }, checkEveryMs);
    timer.unref();
  };
  // The first check before the first read: replicas that are well serve from the start.
  running = check().finally(schedule);
  await running;

  return {
    pool: new RoutedPool(primary, route),
    stats: () => ({
      replicas: replicas.map(({ name, state, lagMs, reads }) => ({ name, state, lagMs, reads })),
      fallbacks: { ...fallbacks },
    }),
    async close() {
      closed = true;
      clearTimeout(timer);
      await running.catch(() => {});
      await Promise.all(replicas.map((replica) => replica.pool.end()));
    },
  };
}
