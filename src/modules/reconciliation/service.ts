import type { Principal } from "../../auth.ts";
import type { PrismaClient, Reader } from "../../db/database.ts";
import type { PaymentChannel, Prisma, Reconciliation } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import { FIRST_DAY } from "../../filters.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import { enqueue } from "../../jobs/store.ts";
import type { Logger } from "../../logger.ts";
import { resolvePaging, toPage, type Page } from "../../paging.ts";
import type { Connectors } from "../../providers/index.ts";
import type { AccountBalanceResult, ProviderPaymentRecord, ReconciliationConnector } from "../../providers/types.ts";
import type { ChannelService } from "../channels/service.ts";
import type { CallbackUrls } from "../channels/callback-urls.ts";
import { channelBalances } from "../ledger/store.ts";
import type { TransactionService } from "../transactions/service.ts";
import { channelReferences, listChannelDay } from "../transactions/store.ts";
import * as store from "./store.ts";

/** Once a day, just after midnight UTC, every active channel's previous day is reconciled. */
export const RECONCILIATION_SCHEDULE_JOB = "reconciliation.schedule";
/** One channel and day: {channelId, date}. */
export const RECONCILIATION_RUN_JOB = "reconciliation.run";
const SCHEDULE_KEY = { schedule: "daily" } as const;
/** Minutes after midnight UTC the previous day is reconciled: late payments' callbacks have landed by then. */
const SCHEDULE_MINUTE = 15;
/** Runs of one channel's day whose provider could not be read, an hour apart, before the day is left failed. */
const RUN_ATTEMPTS = 6;
/**
 * The provider's list is read this much beyond the day on each side: a payment created here just before
 * midnight is created there just after. Its payments outside the day are matched, never reported missing.
 */
const EDGE_MS = 10 * 60_000;

export const itemKinds = ["missing_here", "missing_there", "status_mismatch", "amount_mismatch", "reversed_not_disputed"] as const;
export type ItemKind = (typeof itemKinds)[number];

export interface ReconciliationServiceDeps {
  prisma: PrismaClient;
  /** The reader for the lists (a replica when there is one); the primary when unset. */
  read?: Reader;
  channels: ChannelService;
  connectors: Connectors;
  transactions: Pick<TransactionService, "reconcileNow">;
  callbackUrls: Pick<CallbackUrls, "balanceOf">;
  jobs: JobRunner;
  logger: Logger;
}

/** "2026-11-24" -> [that day 00:00 UTC, the next day 00:00 UTC). Not a day that has not begun. */
export function dayBounds(date: unknown, field = "date"): { date: string; from: Date; to: Date } {
  if (typeof date !== "string" || !/^\d{4}-\d{2}-\d{2}$/.test(date)) throw new ValidationError(field, "must be a day as YYYY-MM-DD (UTC)");
  const from = new Date(`${date}T00:00:00.000Z`);
  if (Number.isNaN(from.getTime()) || from.toISOString().slice(0, 10) !== date) throw new ValidationError(field, "is not a calendar day");
  if (date < FIRST_DAY) throw new ValidationError(field, `must not be before ${FIRST_DAY}`);
  if (from.getTime() > Date.now()) throw new ValidationError(field, "must not be in the future");
  return { date, from, to: new Date(from.getTime() + 86_400_000) };
}

const utcDay = (at: Date) => at.toISOString().slice(0, 10);
const json = (amount: bigint) => Number(amount);

interface GatewayPayment {
  id: number;
  reference: string;
  providerReference: string | null;
  amount: bigint;
  currency: string;
  status: string;
  /** A push the provider can be asked about (its request id); null for payments made on a checkout page. */
  checkoutRequestId: string | null;
  /** Its latest dispute's status (null when never disputed) and what was refunded: a reversal they account for is no difference. */
  disputeStatus: string | null;
  amountRefunded: bigint;
}

/** The gateway already knows the money went back to the payer: the dispute was lost, or the payment refunded in full. */
const reversalKnown = (payment: GatewayPayment) => payment.disputeStatus === "lost" || payment.amountRefunded >= payment.amount;

/** Count per status and completed totals per currency, for one side. */
function sideSummary(payments: { amount: bigint; currency: string; status: string }[]) {
  const byStatus: Record<string, number> = {};
  const completed: Record<string, number> = {};
  for (const p of payments) {
    byStatus[p.status] = (byStatus[p.status] ?? 0) + 1;
    if (p.status === "completed") completed[p.currency] = (completed[p.currency] ?? 0) + json(p.amount);
  }
  return { count: payments.length, by_status: byStatus, completed_totals: completed };
}

/**
 * Reconciliation: one channel's payments of one UTC day against the provider's own record (Paystack's list,
 * the sandbox's approvals; M-Pesa lists nothing, so its pending payments are asked about one by one), with
 * each difference stored as an item. A payment pending here that the provider settled is settled through
 * the transactions' own reconcile path (verify at the provider, then the status machine), never written
 * here. For M-Pesa the shortcode's balance is asked for too; its answer comes later by callback and is
 * merged into the report's summary beside the ledger's figure (the report does not wait for it).
 */
export function createReconciliationService(deps: ReconciliationServiceDeps) {
  const { prisma, channels, connectors, transactions, logger } = deps;
  const reader = deps.read?.prisma ?? prisma;

  /** Compares the day's two sides, settling what the provider says is settled; answers the items and what was compared. */
  async function compare(channel: PaymentChannel, day: { from: Date; to: Date }, ours: GatewayPayment[], theirs: ProviderPaymentRecord[] | null, listsAll: boolean) {
    const items: store.NewItem[] = [];
    const byReference = new Map<string, ProviderPaymentRecord>();
    const byProviderReference = new Map<string, ProviderPaymentRecord>();
    for (const record of theirs ?? []) {
      if (record.reference) byReference.set(record.reference, record);
      if (record.providerReference) byProviderReference.set(record.providerReference, record);
    }
    const matched = new Set<ProviderPaymentRecord>();
    let settled = 0;
    const askable = connectors.for(channel)?.hosted !== undefined;

    for (const payment of ours) {
      const record = byReference.get(payment.reference) ?? (payment.providerReference ? byProviderReference.get(payment.providerReference) : undefined);
      if (record) matched.add(record);
      const base = { reference: payment.reference, providerReference: payment.providerReference ?? record?.providerReference ?? null, gatewayAmount: payment.amount, currency: payment.currency };
      if (payment.status === "pending") {
        // Asked when the provider says it is settled, or when it cannot list its payments (only asking tells).
        if (record ? record.status === "pending" : listsAll) continue;
        // Only what the reconcile job itself would ask about: a hosted payment, or a push with its request id.
        if (!askable && payment.checkoutRequestId === null) {
          if (record) items.push({ ...base, kind: "status_mismatch", gatewayStatus: "pending", providerStatus: record.status, providerAmount: record.amount });
          continue;
        }
        const after = await transactions.reconcileNow(payment.id);
        if (!after || after.status === "pending") {
          if (record) items.push({ ...base, kind: "status_mismatch", gatewayStatus: "pending", providerStatus: record.status, providerAmount: record.amount, resolution: "verify_did_not_settle" });
          continue;
        }
        settled++;
        items.push({ ...base, kind: "status_mismatch", gatewayStatus: "pending", providerStatus: after.status, providerAmount: record?.amount ?? null, resolution: "settled_via_verify" });
        payment.status = after.status;
        continue;
      }
      if (!theirs) continue; // a provider that lists nothing (M-Pesa) is only asked about pending payments
      if (!record) {
        if (payment.status === "completed") items.push({ ...base, kind: "missing_there", gatewayStatus: payment.status, providerStatus: null, providerAmount: null });
        continue;
      }
      if (record.status === "reversed" && payment.status === "completed") {
        // A chargeback (or refund) the gateway has not recorded: its balance and ledger still count money the merchant no longer has.
        if (!reversalKnown(payment)) items.push({ ...base, kind: "reversed_not_disputed", gatewayStatus: payment.status, providerStatus: record.status, providerAmount: record.amount });
        continue;
      }
      // A payment reversed there and failed here is no difference: neither side kept the money.
      const providerStatus = record.status === "reversed" ? "failed" : record.status;
      if (providerStatus !== payment.status) {
        items.push({ ...base, kind: "status_mismatch", gatewayStatus: payment.status, providerStatus: record.status, providerAmount: record.amount });
      } else if (record.amount !== payment.amount || record.currency !== payment.currency) {
        items.push({ ...base, kind: "amount_mismatch", gatewayStatus: payment.status, providerStatus: record.status, providerAmount: record.amount, currency: record.currency === payment.currency ? payment.currency : `${payment.currency}/${record.currency}`.slice(0, 7) });
      }
    }
    const unmatched = (theirs ?? []).filter((r) => !matched.has(r) && r.status === "completed" && (r.createdAt === null || (r.createdAt >= day.from && r.createdAt < day.to)));
    const ourOtherDays = await channelReferences(prisma, channel.id, unmatched.flatMap((r) => (r.reference ? [r.reference] : [])));
    for (const record of unmatched) {
      // Money the provider took that the gateway has no record of (on this channel): one of ours of the day before is not.
      if (record.reference && ourOtherDays.has(record.reference)) continue;
      items.push({ kind: "missing_here", reference: record.reference, providerReference: record.providerReference, gatewayStatus: null, providerStatus: record.status, gatewayAmount: null, providerAmount: record.amount, currency: record.currency });
    }
    return { items, settled, matched };
  }

  /** Asks the provider for its balance; the answer is merged by applyBalance. Never fails the report. */
  async function requestBalance(report: Reconciliation, channel: PaymentChannel, rail: ReconciliationConnector, config: unknown): Promise<void> {
    const balances = await channelBalances(prisma, { merchantId: channel.merchantId, mode: channel.mode }, channel.id);
    const ledger = balances.map((b) => ({ currency: b.currency, available: json(b.available), pending_out: json(b.pendingOut) }));
    const unavailable = rail.balanceUnavailable?.(config);
    const urls = unavailable ? undefined : deps.callbackUrls.balanceOf(channel, String(report.id));
    if (!urls) {
      await store.mergeBalance(prisma, report.id, channel.id, { state: "unavailable", reason: unavailable ?? "the provider posts no balance answers", ledger });
      return;
    }
    await store.mergeBalance(prisma, report.id, channel.id, { state: "requested", requested_at: new Date().toISOString(), ledger });
    try {
      await rail.requestBalance!({ config, resultUrl: urls.result, timeoutUrl: urls.timeout });
    } catch (error) {
      logger.warn({ reconciliationId: report.id, err: (error as Error).message }, "account balance request refused");
      await store.mergeBalance(prisma, report.id, channel.id, { state: "failed", error: (error as Error).message.slice(0, 300) });
    }
  }

  /**
   * One channel and day. Unless `again`, a report already made for it (and not failed) is answered instead of a
   * new one: the daily job may run twice. A provider that cannot be read fails the report (its error kept).
   */
  async function run(channel: PaymentChannel, day: string, options: { again?: boolean } = {}): Promise<Reconciliation> {
    const { date, from, to } = dayBounds(day);
    if (!options.again) {
      const kept = await store.findKeptForDay(prisma, channel.id, date);
      if (kept) return kept;
    }
    const report = await store.create(prisma, { merchantId: channel.merchantId, mode: channel.mode, channelId: channel.id, date });
    const rail = connectors.for(channel)?.reconciliation;
    try {
      const config = channels.readChannelConfig(channel);
      const ours: GatewayPayment[] = await listChannelDay(prisma, channel, from, to);
      const providerReferences = ours.flatMap((p) => (p.providerReference ? [p.providerReference] : []));
      const listed = rail?.payments ? await rail.payments({ config, from: new Date(from.getTime() - EDGE_MS), to: new Date(to.getTime() + EDGE_MS), providerReferences }) : null;
      const settlements = rail?.settlements ? await rail.settlements({ config, from, to }) : null;
      const gatewayBefore = sideSummary(ours);
      const { items, settled, matched } = await compare(channel, { from, to }, ours, listed, rail?.listsAll === true);
      // The provider's side of the day: what it created that day, and what matched ours from the edges.
      const theirs = listed?.filter((r) => matched.has(r) || r.createdAt === null || (r.createdAt >= from && r.createdAt < to)) ?? null;
      const counts = Object.fromEntries(itemKinds.map((kind) => [kind, items.filter((i) => i.kind === kind).length]));
      const summary = {
        provider: channel.provider,
        gateway: { ...sideSummary(ours), before_settling: gatewayBefore.by_status },
        provider_record: theirs ? sideSummary(theirs) : null,
        items: counts,
        differences: items.length,
        settled_via_verify: settled,
        settlements: settlements
          ? {
              count: settlements.count,
              statuses: settlements.statuses,
              totals: Object.fromEntries(Object.entries(settlements.totals).map(([c, t]) => [c, { total: json(t.total), fees: json(t.fees), settled: json(t.settled) }])),
            }
          : null,
      };
      await store.complete(prisma, report.id, summary as Prisma.InputJsonValue, items);
      if (rail?.requestBalance) await requestBalance(report, channel, rail, config);
    } catch (error) {
      logger.warn({ reconciliationId: report.id, channelId: channel.id, date, err: (error as Error).message }, "reconciliation failed");
      await store.fail(prisma, report.id, error instanceof GatewayError ? error.message : `reconciliation failed: ${(error as Error).message}`);
    }
    return store.findById(prisma, report.id);
  }

  /** The next moment the daily schedule runs: today's SCHEDULE_MINUTE past midnight UTC, or tomorrow's. */
  function nextScheduledRun(now = new Date()): Date {
    const today = new Date(`${utcDay(now)}T00:${String(SCHEDULE_MINUTE).padStart(2, "0")}:00.000Z`);
    return today.getTime() > now.getTime() ? today : new Date(today.getTime() + 86_400_000);
  }

  /** The one queued daily schedule, at its next run: by its key, a copy already queued is replaced. */
  const queueNextSchedule = (): Promise<void> =>
    enqueue(prisma, RECONCILIATION_SCHEDULE_JOB, { ...SCHEDULE_KEY }, { key: SCHEDULE_KEY, runAt: nextScheduledRun() });

  deps.jobs.register<Record<string, never>>({
    kind: RECONCILIATION_SCHEDULE_JOB,
    concurrency: 1,
    // Queues yesterday's run of every active channel (one per channel and day), then queues itself for tomorrow:
    // by its key, so a copy queued meanwhile (a restart's scheduleDaily) is replaced and one schedule remains.
    // A channel created today had no yesterday: it gets no report (an empty one would only be noise in its list).
    async run() {
      const yesterday = utcDay(new Date(Date.now() - 86_400_000));
      for (const channelId of await store.activeChannelIds(prisma, dayBounds(yesterday).to)) {
        await enqueue(prisma, RECONCILIATION_RUN_JOB, { channelId, date: yesterday }, { key: { channelId, date: yesterday } });
      }
      await queueNextSchedule();
      deps.jobs.nudge();
    },
  });

  deps.jobs.register<{ channelId: number; date: string }>({
    kind: RECONCILIATION_RUN_JOB,
    concurrency: 2,
    async run({ channelId, date }, job) {
      const channel = await channels.findById(channelId);
      if (!channel) return;
      const report = await run(channel, date);
      // A provider that could not be read is asked again an hour on, a few times; each failed report stays as a record.
      if (report.status === "failed" && job.attempt < RUN_ATTEMPTS) return { retryInMs: 60 * 60_000, error: report.error ?? "failed" };
    },
  });

  return {
    run,
    dayBounds,

    /** Queues the daily schedule (at gateway start): at most one stays queued (a schedule running meanwhile replaces it by its key). */
    scheduleDaily: queueNextSchedule,

    /** The operator's run (CLI): a channel by id, whoever's; always a new report. */
    async runForOperator(channelId: number, date: string): Promise<Reconciliation & { items: Awaited<ReturnType<typeof store.findById>>["items"] }> {
      dayBounds(date);
      const channel = await channels.findById(channelId);
      if (!channel) throw new NotFoundError(`Payment channel ${channelId}`);
      const report = await run(channel, date, { again: true });
      return store.findById(prisma, report.id);
    },

    /** A merchant's run of one of its channels (owners): always a new report. */
    async runForMerchant(principal: Principal, input: { paymentChannelId: number; date: string }): Promise<Reconciliation> {
      dayBounds(input.date);
      const channel = await channels.getChannel(principal, input.paymentChannelId);
      return run(channel, input.date, { again: true });
    },

    /** The answer to a balance request of report `reference` on this channel (a callback): merged into its summary. */
    async applyBalance(channel: PaymentChannel, reference: string, result: AccountBalanceResult): Promise<void> {
      const id = /^\d{1,9}$/.test(reference) ? Number(reference) : null;
      const balance =
        result.state === "received"
          ? {
              state: "received",
              received_at: new Date().toISOString(),
              completed_at: result.completedAt,
              accounts: result.accounts.map((a) => ({
                account: a.account, currency: a.currency, current: json(a.current), available: json(a.available), reserved: json(a.reserved), uncleared: json(a.uncleared),
              })),
            }
          : { state: "failed", received_at: new Date().toISOString(), error: `${result.code}: ${result.message}` };
      const applied = id !== null && (await store.mergeBalance(prisma, id, channel.id, balance));
      if (!applied) logger.warn({ channelId: channel.id, reference }, "balance answer for no reconciliation of this channel; ignored");
    },

    async get(principal: Principal, id: number, query: { include?: Prisma.ReconciliationInclude; select?: Prisma.ReconciliationSelect } = {}): Promise<Reconciliation> {
      const found = await store.findScoped(prisma, principal, id, query);
      if (!found) throw new NotFoundError("Reconciliation");
      return found as Reconciliation;
    },

    async listPage(principal: Principal, input: store.ReconciliationFilters & { page?: number | null; limit?: number | null }, query: object = {}): Promise<Page<Reconciliation>> {
      const paging = resolvePaging(input);
      const { items, total } = await store.listPage(reader, principal, input, paging, query);
      return toPage(items, total, paging);
    },

    connectionSlice: (principal: Principal, filters: store.ReconciliationFilters, query: object) => store.connectionSlice(reader, principal, filters, query),
    count: (principal: Principal, filters: store.ReconciliationFilters) => store.count(reader, principal, filters),
  };
}

export type ReconciliationService = ReturnType<typeof createReconciliationService>;
