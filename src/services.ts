import type { Config } from "./config.ts";
import type { PrismaClient } from "./db/database.ts";
import { createChannelService } from "./modules/channels/service.ts";
import { createCustomerService } from "./modules/customers/service.ts";
import { createEventPublisher } from "./modules/events/publisher.ts";
import { createMerchantService } from "./modules/merchants/service.ts";
import { createTransactionService } from "./modules/transactions/service.ts";
import { createConnectors } from "./providers/index.ts";
import { createMomoService } from "./modules/momo/service.ts";
import type { RedisConnections } from "./infra/redis.ts";
import type { Logger } from "./logger.ts";
import type { SecretBox } from "./security/encryption.ts";

export interface ServiceDeps {
  prisma: PrismaClient;
  secrets: SecretBox;
  config: Pick<Config, "publicBaseUrl" | "momo">;
  /** Shares events and provider tokens (Daraja) across instances when set. */
  redis: RedisConnections | undefined;
  logger: Logger;
}

/** The domain services, built once per process and shared by every transport. */
export function createServices(deps: ServiceDeps) {
  const { prisma } = deps;
  const publisher = createEventPublisher(deps.redis);
  const momoConfig = deps.config.momo;
  const connectors = createConnectors({ mpesaBaseUrl: momoConfig.mpesaBaseUrl, sandboxStkDelayMs: momoConfig.sandboxStkDelayMs, redis: deps.redis });
  const channels = createChannelService(prisma, deps.secrets);
  const customers = createCustomerService(prisma);
  const transactions = createTransactionService({ prisma, channels, customers, connectors, publisher, publicBaseUrl: deps.config.publicBaseUrl });
  return {
    publisher,
    connectors,
    merchants: createMerchantService(prisma),
    channels,
    customers,
    transactions,
    momo: createMomoService({ prisma, channels, transactions, connectors, publicBaseUrl: deps.config.publicBaseUrl, config: momoConfig, logger: deps.logger }),
  };
}

export type Services = ReturnType<typeof createServices>;
