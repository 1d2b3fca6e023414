import type { Config } from "./config.ts";
import type { PrismaClient } from "./db/database.ts";
import { createChannelService } from "./modules/channels/service.ts";
import { createCustomerService } from "./modules/customers/service.ts";
import { createEventPublisher, type EventPublisher } from "./modules/events/publisher.ts";
import { createMerchantService } from "./modules/merchants/service.ts";
import { createTransactionService } from "./modules/transactions/service.ts";
import { createConnectors } from "./providers/index.ts";
import { createMomoService } from "./modules/momo/service.ts";
import type { RedisConnections } from "./infra/redis.ts";
import { createLogger, type Logger } from "./logger.ts";
import type { SecretBox } from "./security/encryption.ts";

export interface ServiceDeps {
  prisma: PrismaClient;
  secrets: SecretBox;
  config: Pick<Config, "publicBaseUrl"> & Partial<Pick<Config, "momo">>;
  publisher?: EventPublisher;
  /** Shares provider tokens (Daraja) across instances when set. */
  redis?: RedisConnections | undefined;
  logger?: Logger;
}

const defaultMomoConfig: Config["momo"] = {
  mpesaBaseUrl: undefined,
  sandboxStkDelayMs: 2000,
  reconcileIntervalMs: 10_000,
  stkCallbackOverdueMs: 30_000,
  stkQueryBackoffMs: 10_000,
  stkLifetimeMs: 180_000,
  c2bValidationTimeoutMs: 5000,
};

/** The domain services, built once per process and shared by every transport. */
export function createServices(deps: ServiceDeps) {
  const { prisma } = deps;
  const publisher = deps.publisher ?? createEventPublisher(deps.redis);
  const momoConfig = deps.config.momo ?? defaultMomoConfig;
  const connectors = createConnectors({ mpesaBaseUrl: momoConfig.mpesaBaseUrl, sandboxStkDelayMs: momoConfig.sandboxStkDelayMs, redis: deps.redis });
  const channels = createChannelService(prisma, deps.secrets);
  const customers = createCustomerService(prisma);
  const transactions = createTransactionService({ prisma, channels, customers, connectors, publisher, publicBaseUrl: deps.config.publicBaseUrl });
  const logger = deps.logger ?? createLogger("silent");
  return {
    publisher,
    connectors,
    merchants: createMerchantService(prisma),
    channels,
    customers,
    transactions,
    momo: createMomoService({ prisma, channels, transactions, connectors, publicBaseUrl: deps.config.publicBaseUrl, config: momoConfig, logger }),
  };
}

export type Services = ReturnType<typeof createServices>;
