import cluster from "node:cluster";
import { ConfigError, loadConfig, type Config } from "./config.ts";
import { createLogger, type Logger } from "./logger.ts";

/**
 * Process entry: configuration, then either one gateway in this process (WORKERS=1, the default), or, with
 * WORKERS > 1, a primary that runs that many gateway workers sharing the port (src/cluster.ts). The primary
 * imports no gateway code: it only starts, restarts and stops workers.
 */
async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
  const baseLogger = createLogger(config.logLevel, undefined, { pretty: config.nodeEnv === "development" && process.stdout.isTTY === true });

  if (config.workers > 1 && cluster.isPrimary) {
    const { runPrimary } = await import("./cluster.ts");
    return runPrimary(config, baseLogger);
  }
  const workerIndex = cluster.isWorker ? Number(process.env.GATEWAY_WORKER_INDEX) : undefined;
  await runGateway(config, workerIndex === undefined ? baseLogger : baseLogger.child({ worker: workerIndex }), workerIndex);
}

/** One gateway: listen, create the demo merchant on a first start (not in production), drain and stop on SIGTERM/SIGINT. */
async function runGateway(config: Config, logger: Logger, workerIndex: number | undefined) {
  const [{ createGateway }, { DataDirLockedError }, { createDemoMerchantIfEmpty }] = await Promise.all([
    import("./server.ts"),
    import("./db/data-dir-lock.ts"),
    import("./demo.ts"),
  ]);
  let gateway;
  try {
    gateway = await createGateway(config, logger);
  } catch (error) {
    if (error instanceof DataDirLockedError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }

  // Listening first: a start that fails on a busy port or a bad HOST creates no demo merchant, so the
  // next start does, and prints its key.
  const address = await gateway.app.listen({ port: config.port, host: config.host });
  // Of several workers only the first looks for an empty database: one demo merchant, one banner, one hint.
  const firstWorker = workerIndex === undefined || workerIndex === 1;
  // Production never makes a demo: its merchant is made by `cli setup`, and no secret is printed by a start.
  const production = config.nodeEnv === "production";
  const demo = firstWorker && !production ? await createDemoMerchantIfEmpty(gateway.services) : null;
  logger.info({ address, database: gateway.db.backend }, "payment gateway listening");
  if (firstWorker && production && !(await gateway.services.merchants.hasAnyMerchant())) {
    logger.info("no merchant yet: run `npm run cli -- setup` to create the first merchant and its owner");
  }

  if (demo) {
    // Printed once, to the terminal only (not the log): the key and password are secrets never shown again.
    process.stdout.write(
      [
        "",
        "  Demo merchant created with a sandbox payment channel.",
        `  Test API key (shown once, keep it): ${demo.testKey}`,
        "  Lost it? npm run cli -- demo  prints a new one.",
        `  Try: curl -H "X-API-Key: ${demo.testKey}" ${config.publicBaseUrl}/v1/status`,
        `  Dashboard: ${config.publicBaseUrl}/dashboard  e-mail ${demo.user.email}  password (shown once) ${demo.user.password}`,
        "",
        "",
      ].join("\n"),
    );
  }

  let stopping = false;
  /**
   * The drain: /ready answers 503 at once and jobs stop being claimed; for SHUTDOWN_DRAIN_DELAY_MS requests are
   * still served (each closing its connection) while a balancer notices; then WebSockets close with 1001, the
   * port closes, in-flight requests finish, jobs still running are released, and the process exits. All of it
   * within SHUTDOWN_TIMEOUT_MS, after which whatever is left is cut off (exit code 1).
   */
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const { timeoutMs, drainDelayMs } = config.shutdown;
    const deadline = Date.now() + timeoutMs;
    logger.info({ signal, drainDelayMs, timeoutMs }, "shutting down: draining (/ready answers 503)");
    const force = setTimeout(() => {
      logger.error(`shutdown took longer than SHUTDOWN_TIMEOUT_MS (${timeoutMs} ms); exiting`);
      void flushLogs(logger, 500).then(() => process.exit(1));
    }, timeoutMs);
    force.unref();
    let code = 0;
    try {
      // Jobs still running a second before the deadline go back to the queue for another instance.
      gateway.drain({ releaseJobsAt: deadline - Math.min(1000, timeoutMs / 4) });
      if (drainDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, drainDelayMs));
      logger.info("shutting down: closing the port and finishing in-flight requests");
      await gateway.close();
      logger.info("shutdown complete");
    } catch (error) {
      logger.error({ err: error }, "error during shutdown");
      code = 1;
    }
    await flushLogs(logger, 1000);
    process.exit(code);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
  // A worker whose primary is gone (kill -9 of the primary) stops rather than serving on unsupervised.
  if (cluster.isWorker) process.on("disconnect", () => void shutdown("primary gone"));
}

/** Lets queued log lines reach stdout before exiting, but never waits on a pipe nobody reads for long. */
function flushLogs(logger: Logger, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    logger.flush(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

main().catch((error) => {
  console.error("Gateway failed to start:", error instanceof Error ? error.message : error);
  process.exit(1);
});
