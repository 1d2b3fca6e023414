import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { MAX_STATS_DAYS, type CurrencyTotal, type PaymentStats, type StatsDay, type StatsFigures, type StatsPeriod } from "./stats.ts";

/** paymentStats: the dashboard overview's figures (stats.ts), for the caller's merchant and mode. */

const CurrencyTotalType = builder.objectRef<CurrencyTotal>("CurrencyTotal").implement({
  description: "An amount in one currency, and how many payments (or refunds) make it.",
  fields: (t) => ({
    currency: t.exposeString("currency"),
    amount: t.expose("amount", { type: "BigInt", description: "In the currency's minor unit." }),
    count: t.exposeInt("count"),
  }),
});

const FiguresType = builder.interfaceRef<StatsFigures>("PaymentFigures").implement({
  description: "Completed payments per currency, completed and failed counts, the success rate and completed refunds.",
  fields: (t) => ({
    volume: t.field({ type: [CurrencyTotalType], description: "Completed payments' amounts and count, per currency.", resolve: (f) => f.volume }),
    completedCount: t.exposeInt("completedCount"),
    failedCount: t.exposeInt("failedCount"),
    successRate: t.exposeFloat("successRate", { nullable: true, description: "completed / (completed + failed), from 0 to 1; null when none settled." }),
    refunds: t.field({ type: [CurrencyTotalType], description: "Completed refunds' amounts and count, per currency.", resolve: (f) => f.refunds }),
  }),
});

const StatsDayType = builder.objectRef<StatsDay>("PaymentStatsDay").implement({
  interfaces: [FiguresType],
  description: "One day's figures (a day in the merchant's time zone): payments and refunds created that day.",
  fields: (t) => ({
    date: t.exposeString("date", { description: "YYYY-MM-DD, in PaymentStats.timezone." }),
  }),
});

const StatsPeriodType = builder.objectRef<StatsPeriod>("PaymentStatsPeriod").implement({
  interfaces: [FiguresType],
  description: "The figures of the last `days` days of the merchant's time zone, today included.",
  fields: (t) => ({
    days: t.exposeInt("days"),
    since: t.expose("since", { type: "DateTime", description: "The period's first day's midnight in the merchant's time zone." }),
  }),
});

const PaymentStatsType = builder.objectRef<PaymentStats>("PaymentStats").implement({
  description: "Payment and refund figures per day and per period, days of the merchant's time zone (timezone). A payment counts on the day it was created (as in the lists' date filters).",
  fields: (t) => ({
    asOf: t.expose("asOf", { type: "DateTime" }),
    timezone: t.exposeString("timezone", { description: "The merchant's time zone (IANA name, Brand settings): the zone of every day and period here." }),
    daily: t.field({ type: [StatsDayType], description: "One per day, oldest first, today last; empty days included.", resolve: (s) => s.daily }),
    periods: t.field({ type: [StatsPeriodType], description: "In the order asked for.", resolve: (s) => s.periods }),
  }),
});

builder.queryFields((t) => ({
  paymentStats: t.field({
    type: PaymentStatsType,
    description: "The overview's figures: volume, counts, success rate and refunds, per day (of the merchant's time zone) and per period.",
    errors: { types: businessErrors },
    args: {
      days: t.arg.int({ required: false, description: `The daily series' length, 1 to ${MAX_STATS_DAYS} (default 30).` }),
      periods: t.arg.intList({ required: false, description: `Periods in days, today included, each 1 to ${MAX_STATS_DAYS} (default [1, 7, 30]).` }),
    },
    resolve: (_root, args, ctx) => ctx.services.reports.stats(ctx.principal!, args),
  }),
}));
