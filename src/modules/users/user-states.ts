import type { UserRole } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { RedisConnections } from "../../infra/redis.ts";
import type { Logger } from "../../logger.ts";

/**
 * What a signed-in user may do now: every request and every operation over a long-lived connection checks its
 * access token against the user's current state (disabled, role), so disabling or demoting a user applies at once
 * and not when the token lapses. States are kept in process for a short while; a change (disable, role, password)
 * is published (through Redis when REDIS_URL is set, so every instance and the CLI reach each other; in process
 * otherwise): every instance drops the state and closes the user's WebSockets and SSE streams.
 */
export interface UserState {
  merchantId: number;
  role: UserRole;
}

export interface UserStates {
  /** The user's merchant and role now; null when disabled or gone. */
  current(userId: number): Promise<UserState | null>;
  /** Tells every instance (this one included) that the user changed. */
  changed(userId: number): Promise<void>;
  /** Called with the user's id on every change seen here, or "all" when changes may have been missed (Redis reconnected). */
  onChanged(listener: (userId: number | "all") => void): () => void;
  close(): void;
}

const CHANNEL = "payment-gateway:user-changed";
const MAX_ENTRIES = 10_000;

export function createUserStates(options: { prisma: PrismaClient; ttlMs: number; redis?: RedisConnections | undefined; logger?: Logger }): UserStates {
  const { prisma, ttlMs, redis, logger } = options;
  const entries = new Map<number, { state: UserState | null; expiresAt: number }>();
  const listeners = new Set<(userId: number | "all") => void>();
  const emit = (userId: number | "all") => {
    if (userId === "all") entries.clear();
    else entries.delete(userId);
    for (const listener of listeners) listener(userId);
  };

  if (redis) {
    const subscriber = redis.client("user-changes");
    subscriber.subscribe(CHANNEL).catch((error: Error) => logger?.warn({ err: error.message }, "could not subscribe to user changes"));
    subscriber.on("message", (channel: string, message: string) => {
      if (channel === CHANNEL && Number.isSafeInteger(Number(message))) emit(Number(message));
    });
    // Messages sent while the connection was down are lost: start over rather than trust what is kept.
    redis.onSubscriberReady(subscriber, () => emit("all"));
  }

  return {
    async current(userId) {
      const entry = entries.get(userId);
      if (entry && entry.expiresAt > Date.now()) return entry.state;
      const user = await prisma.user.findUnique({ where: { id: userId }, select: { merchantId: true, role: true, disabledAt: true } });
      const state = user && !user.disabledAt ? { merchantId: user.merchantId, role: user.role } : null;
      if (ttlMs > 0) {
        if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
        entries.set(userId, { state, expiresAt: Date.now() + ttlMs });
      }
      return state;
    },
    async changed(userId) {
      emit(userId);
      if (redis) await redis.client("pubsub-publish").publish(CHANNEL, String(userId));
    },
    onChanged(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      entries.clear();
      listeners.clear();
    },
  };
}
