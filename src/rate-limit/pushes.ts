import { createHash } from "node:crypto";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { RedisConnections } from "../infra/redis.ts";
import type { LimiterName } from "./limiter.ts";

/**
 * How many M-Pesa prompts the public pages (the hosted checkout, and so every payment link) may send: per phone
 * number (across every merchant: it is the payer's phone we protect), per payment link and per merchant and mode,
 * in a fixed window (PUSH_LIMIT_* in config.ts). Shared through Redis when configured (with a per-instance
 * in-memory fallback while it is unreachable), in memory otherwise. On even when RATE_LIMIT_ENABLED is false: like
 * the sign-in limiter, this protects people, not the gateway's capacity.
 */
export interface PushLimitSettings {
  perPhone: number;
  perLink: number;
  perMerchant: number;
  windowSeconds: number;
}

export interface PushLimiterOptions extends PushLimitSettings {
  redis: RedisConnections | undefined;
  /** Told of each refusal (metrics). */
  onRefused?: (limiter: LimiterName) => void;
}

/** One push's budgets: the number (E.164), the link it was made through (if any), its merchant and mode. */
export interface PushBudgets {
  phone: string;
  /** `merchantId:slug`, so a merchant naming another's slug in metadata only spends its own budget. */
  link: string | null;
  /** `merchantId:mode`. */
  merchant: string;
}

export type PushBudgetName = "phone" | "link" | "merchant";

export type PushCharge = { allowed: true; refund(): Promise<void> } | { allowed: false; budget: PushBudgetName; retryAfterSeconds: number };

const METRIC: Record<PushBudgetName, LimiterName> = { phone: "push_phone", link: "push_link", merchant: "push_merchant" };

export function createPushLimiter(options: PushLimiterOptions) {
  // A connection of its own, set as the request limiter's (no offline queue, 1 s command timeout): a dead Redis fails
  // over at once. Not the request limiter's own: created first, it left that one's outage warnings unsaid on a cluster.
  const client = options.redis?.client("push-limit", { enableOfflineQueue: false, commandTimeout: 1000 });
  const make = (keyPrefix: string, points: number): RateLimiterAbstract => {
    const memory = new RateLimiterMemory({ keyPrefix, points, duration: options.windowSeconds });
    if (!client) return memory;
    return new RateLimiterRedis({ storeClient: client, keyPrefix, points, duration: options.windowSeconds, rejectIfRedisNotReady: true, insuranceLimiter: memory });
  };
  const budgets: Record<PushBudgetName, RateLimiterAbstract> = {
    phone: make("gw:push:phone", options.perPhone),
    link: make("gw:push:link", options.perLink),
    merchant: make("gw:push:merchant", options.perMerchant),
  };
  // Phone numbers never reach Redis keys in plaintext.
  const bucket = (name: PushBudgetName, key: string) => (name === "phone" ? createHash("sha256").update(`push:${key}`, "utf8").digest("base64url") : key);

  return {
    store: client ? ("redis" as const) : ("memory" as const),
    settings: { perPhone: options.perPhone, perLink: options.perLink, perMerchant: options.perMerchant, windowSeconds: options.windowSeconds } satisfies PushLimitSettings,

    /**
     * Spends one push of each budget, the phone's first: a number already over its budget is refused before it
     * can spend its link's or merchant's, so spamming one phone does not block other payers. A refusal gives back
     * what it had spent; an allowed push may be refunded when it is not sent after all.
     */
    async charge(push: PushBudgets): Promise<PushCharge> {
      const order: [PushBudgetName, string | null][] = [["phone", push.phone], ["link", push.link], ["merchant", push.merchant]];
      const spent: [PushBudgetName, string][] = [];
      const refund = async () => {
        await Promise.all(spent.map(([name, key]) => budgets[name].reward(key, 1).catch(() => undefined)));
      };
      for (const [name, key] of order) {
        if (key === null) continue;
        const id = bucket(name, key);
        try {
          await budgets[name].consume(id);
          spent.push([name, id]);
        } catch (rejection) {
          if (!(rejection instanceof RateLimiterRes)) throw rejection;
          await refund();
          options.onRefused?.(METRIC[name]);
          return { allowed: false, budget: name, retryAfterSeconds: Math.max(1, Math.ceil(rejection.msBeforeNext / 1000)) };
        }
      }
      return { allowed: true, refund };
    },
  };
}

export type PushLimiter = ReturnType<typeof createPushLimiter>;
