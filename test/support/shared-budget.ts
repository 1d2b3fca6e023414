import { pino } from "pino";
import { expect } from "vitest";
import { apiClient, type HttpResult, type TestGateway } from "./gateway.ts";

/** What a rate-limited answer says is left of the key's budget (X-RateLimit-Remaining). */
export const remaining = (res: HttpResult) => Number(res.headers.get("x-ratelimit-remaining"));

/** A logger that keeps its lines, to count warnings (an instance's own, when several share Redis). */
export function memoryLogger() {
  const lines: { level: number; msg: string }[] = [];
  const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return {
    logger,
    count: (level: "warn" | "info", pattern: RegExp) => lines.filter((l) => l.level === pino.levels.values[level] && pattern.test(l.msg)).length,
  };
}

/** `budget` requests of one key alternating between two instances, then one more on each: both refuse, so the budget is one. */
export async function expectOneSharedBudget([a, b]: [TestGateway, TestGateway], key: string, budget: number): Promise<void> {
  const seen: number[] = [];
  for (let i = 0; i < budget; i++) {
    const res = await apiClient((i % 2 ? b : a).url, key).get("/v1/status");
    expect(res.status).toBe(200);
    seen.push(remaining(res));
  }
  expect(seen).toEqual(Array.from({ length: budget }, (_, i) => budget - 1 - i));
  expect((await apiClient(a.url, key).get("/v1/status")).status).toBe(429);
  expect((await apiClient(b.url, key).get("/v1/status")).status).toBe(429);
}
