import { ConfigError, loadConfig } from "./config.ts";
import { DataDirLockedError } from "./db/data-dir-lock.ts";
import { createDemoMerchantIfEmpty } from "./demo.ts";
import { createLogger } from "./logger.ts";
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
  const logger = createLogger(config.logLevel);

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

  const demoKey = await createDemoMerchantIfEmpty(gateway.services);
  const address = await gateway.app.listen({ port: config.port, host: config.host });
  logger.info({ address, database: gateway.db.backend }, "payment gateway listening");

  if (demoKey) {
    // Printed once, to the terminal only (not the log): the key is a secret and is never shown again.
    process.stdout.write(
      [
        "",
        "  Demo merchant created with a sandbox payment channel.",
        `  Test API key (shown once, keep it): ${demoKey}`,
        `  Try: curl -H "X-API-Key: ${demoKey}" ${config.publicBaseUrl}/v1/status`,
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
    try {
      await gateway.close();
      logger.info("shutdown complete");
      process.exit(0);
    } catch (error) {
      logger.error({ err: error }, "error during shutdown");
      process.exit(1);
    }
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

main().catch((error) => {
  console.error("Gateway failed to start:", error instanceof Error ? error.message : error);
  process.exit(1);
});
