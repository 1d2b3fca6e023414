import { afterAll, beforeAll } from "vitest";
import { startTestGateway, type StartOptions, type TestGateway } from "./gateway.ts";
import { startRedis, type RedisServer } from "./redis.ts";

export interface FixtureOptions extends StartOptions {
  /** Start a Redis of its own for the gateway (REDIS_URL), stopped after it. */
  redis?: boolean;
}

/**
 * The gateway fixture of a describe block (or a file): starts the gateway in beforeAll and hands it to `ready`
 * (assign it, seed merchants), and closes it (and its Redis) in afterAll, so a file does not write those hooks again.
 */
export function useTestGateway(options: FixtureOptions, ready: (gw: TestGateway, redis: RedisServer | undefined) => void | Promise<void>): void {
  let gw: TestGateway | undefined;
  let redis: RedisServer | undefined;
  beforeAll(async () => {
    const { redis: withRedis, ...start } = options;
    if (withRedis) redis = await startRedis();
    gw = await startTestGateway({ ...start, env: { ...start.env, ...(redis ? { REDIS_URL: redis.url } : {}) } });
    await ready(gw, redis);
  });
  afterAll(async () => {
    await gw?.close();
    await redis?.stop();
  });
}
