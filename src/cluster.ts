import cluster, { type Worker } from "node:cluster";
import type { Config } from "./config.ts";
import type { Logger } from "./logger.ts";

/**
 * WORKERS > 1: this (primary) process runs that many gateway processes sharing PORT through node:cluster (the
 * primary accepts connections and hands them to the workers in turn). It opens no database and serves nothing.
 *
 * - Each worker is a whole gateway: its own database pool, Redis connections and job runner. Jobs are claimed
 *   with FOR UPDATE SKIP LOCKED, exactly as between instances, so every worker runs the job runner and job work
 *   spreads over the cores with no special worker whose death would stop it.
 * - Rate limits, events, key revocations and provider tokens are shared through Redis, as between instances
 *   (config.ts requires REDIS_URL and DATABASE_URL with WORKERS > 1).
 * - SIGTERM/SIGINT: every worker drains (see main.ts); the primary exits once all have, with 0 if all exited 0.
 * - A worker that dies after it listened is started again (after 1 s, doubling to 30 s while it keeps dying
 *   within a minute of its start); one that fails before it first listened stops the whole start, since the
 *   others would fail the same way (a bad setting, an unreachable database).
 */
export function runPrimary(config: Config, logger: Logger): void {
  const log = logger.child({ primary: process.pid });
  const byIndex = new Map<number, Worker>();
  const indexOf = new Map<Worker, number>();
  const listened = new Set<number>();
  const startedAt = new Map<number, number>();
  const backoff = new Map<number, number>();
  let stopping = false;
  let announced = false;
  let exitCode = 0;

  const fork = (index: number) => {
    const worker = cluster.fork({ GATEWAY_WORKER_INDEX: String(index) });
    byIndex.set(index, worker);
    indexOf.set(worker, index);
    startedAt.set(index, Date.now());
  };

  cluster.on("listening", (worker, address) => {
    const index = indexOf.get(worker);
    // A worker's own /metrics listener (METRICS_PORT) is not the API port.
    if (index === undefined || (config.metrics.port !== undefined && address.port === config.metrics.port)) return;
    listened.add(index);
    if (!announced && listened.size === config.workers) {
      announced = true;
      log.info({ workers: config.workers, port: address.port }, "all gateway workers listening");
    }
  });

  cluster.on("exit", (worker, code, signal) => {
    const index = indexOf.get(worker);
    indexOf.delete(worker);
    if (index === undefined) return;
    byIndex.delete(index);
    if (stopping) {
      if (code !== 0) exitCode = 1;
      log.info({ worker: index, code, signal }, "gateway worker stopped");
      if (byIndex.size === 0) finish();
      return;
    }
    if (!listened.has(index) && !announced) {
      // Failed before it ever listened: the others would too. Its own message is already on stderr.
      log.error({ worker: index, code, signal }, "a gateway worker failed to start; stopping");
      exitCode = 1;
      stopAll("worker failed to start");
      return;
    }
    const ranMs = Date.now() - (startedAt.get(index) ?? 0);
    const delay = ranMs > 60_000 ? 1000 : Math.min(30_000, (backoff.get(index) ?? 500) * 2);
    backoff.set(index, delay);
    log.error({ worker: index, code, signal, restartInMs: delay }, "gateway worker died; starting it again");
    setTimeout(() => {
      if (!stopping) fork(index);
    }, delay).unref();
  });

  const finish = () => {
    log.info({ code: exitCode }, "all gateway workers stopped");
    logger.flush(() => process.exit(exitCode));
    setTimeout(() => process.exit(exitCode), 1000).unref();
  };

  const stopAll = (reason: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason, workers: byIndex.size }, "stopping gateway workers");
    if (byIndex.size === 0) return finish();
    for (const worker of byIndex.values()) worker.process.kill("SIGTERM");
    // Each worker exits within SHUTDOWN_TIMEOUT_MS on its own; this only covers one that hangs beyond it.
    setTimeout(() => {
      for (const worker of byIndex.values()) worker.process.kill("SIGKILL");
      exitCode = 1;
    }, config.shutdown.timeoutMs + 2000).unref();
  };

  process.on("SIGTERM", () => stopAll("SIGTERM"));
  process.on("SIGINT", () => stopAll("SIGINT"));
  log.info({ workers: config.workers }, "starting gateway workers");
  for (let index = 1; index <= config.workers; index++) fork(index);
}
