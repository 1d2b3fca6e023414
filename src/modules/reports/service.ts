import type { Principal } from "../../auth.ts";
import type { PrismaClient, Reader } from "../../db/database.ts";
import { paymentStats } from "./stats.ts";
import { dayTotals } from "./store.ts";

/**
 * Reports above the money modules: the overview's figures (stats.ts over store.ts's grouped reads) and the
 * transactions CSV (routes.ts, streamed from the transactions' own export). Every read goes to the reader.
 */
export function createReportService(deps: { prisma: PrismaClient; read?: Reader }) {
  const reader = deps.read?.prisma ?? deps.prisma;
  return {
    /** The dashboard overview's figures, per day of the merchant's time zone and per period. */
    stats: (principal: Principal, input: Parameters<typeof paymentStats>[2]) => paymentStats(reader, principal, input),
    /** One merchant's day in one mode, per currency (the daily summary e-mail), from the primary: it is sent once. */
    dayTotals: (merchantId: number, mode: "test" | "live", from: Date, to: Date) => dayTotals(deps.prisma, merchantId, mode, from, to),
  };
}
export type ReportService = ReturnType<typeof createReportService>;
