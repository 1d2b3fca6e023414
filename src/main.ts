import { ConfigError, loadConfig } from "./config.ts";
import { DataDirLockedError } from "./db/data-dir-lock.ts";
import { createDemoMerchantIfEmpty } from "./demo.ts";
import { createLogger, type Logger } from "./logger.ts";
import { createGateway } from "./server.ts";

/** Process entry: configuration, server, graceful shutdown. */
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
  const logger = createLogger(config.logLevel, undefined, { pretty: config.nodeEnv === "development" && process.stdout.isTTY === true });

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
  const demo = await createDemoMerchantIfEmpty(gateway.services);
  logger.info({ address, database: gateway.db.backend }, "payment gateway listening");

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
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down: finishing in-flight requests");
    const force = setTimeout(() => {
      logger.error("shutdown took longer than 10 s; exiting");
      process.exit(1);
    }, 10_000);
    force.unref();
    let code = 0;
    try {
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
