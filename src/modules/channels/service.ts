import { randomBytes } from "node:crypto";
import type { Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import { NotFoundError, ValidationError } from "../../errors.ts";
import { connectorConfigSchemas, isProviderName, providerNames, type ProviderName } from "../../providers/registry.ts";
import type { SecretBox } from "../../security/encryption.ts";

export interface CreateChannelInput {
  name: string;
  provider: string;
  config?: unknown;
}

function validateConfig(provider: ProviderName, config: unknown): unknown {
  const parsed = connectorConfigSchemas[provider].safeParse(config ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const path = issue.path.length ? `config.${issue.path.join(".")}` : "config";
  const problem = issue.code === "invalid_type" && issue.input === undefined ? "is required" : issue.message;
  throw new ValidationError(path, problem);
}

export function createChannelService(prisma: PrismaClient, secrets: SecretBox) {
  return {
    /**
     * A new channel is active and the merchant's default; the previous default loses the flag in the
     * same database transaction, so there is never a moment with two defaults.
     */
    async createChannel(principal: Principal, input: CreateChannelInput) {
      const name = input.name?.trim();
      if (!name) throw new ValidationError("name", "is required");
      if (name.length > 100) throw new ValidationError("name", "must be at most 100 characters");
      if (!input.provider || !isProviderName(input.provider)) {
        throw new ValidationError("provider", `must be one of ${providerNames.join(", ")}`);
      }
      const config = validateConfig(input.provider, input.config);
      const provider = input.provider;
      return prisma.$transaction(async (tx) => {
        await tx.paymentChannel.updateMany({
          where: { merchantId: principal.merchantId, mode: principal.mode, isDefault: true },
          data: { isDefault: false },
        });
        return tx.paymentChannel.create({
          data: {
            merchantId: principal.merchantId,
            mode: principal.mode,
            name,
            provider,
            configEncrypted: secrets.encryptJson(config),
            isActive: true,
            isDefault: true,
            callbackToken: randomBytes(24).toString("base64url"),
          },
        });
      });
    },

    listChannels(principal: Principal, options: { activeOnly?: boolean } = {}) {
      return prisma.paymentChannel.findMany({
        where: {
          merchantId: principal.merchantId,
          mode: principal.mode,
          ...(options.activeOnly ? { isActive: true } : {}),
        },
        orderBy: { id: "asc" },
      });
    },

    async getChannel(principal: Principal, id: number) {
      const channel = await prisma.paymentChannel.findFirst({
        where: { id, merchantId: principal.merchantId, mode: principal.mode },
      });
      if (!channel) throw new NotFoundError(`Payment channel ${id}`);
      return channel;
    },
  };
}

export type ChannelService = ReturnType<typeof createChannelService>;
