import type { PrismaClient } from "./db/database.ts";
import { createChannelService } from "./modules/channels/service.ts";
import { createCustomerService } from "./modules/customers/service.ts";
import { createMerchantService } from "./modules/merchants/service.ts";
import type { SecretBox } from "./security/encryption.ts";

/** The domain services, built once per process and shared by every transport. */
export function createServices(deps: { prisma: PrismaClient; secrets: SecretBox }) {
  return {
    merchants: createMerchantService(deps.prisma),
    channels: createChannelService(deps.prisma, deps.secrets),
    customers: createCustomerService(deps.prisma),
  };
}

export type Services = ReturnType<typeof createServices>;
