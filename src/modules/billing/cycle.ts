import type { Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { Event, Prisma } from "../../db/generated/prisma/client.ts";
import type { TransactionalSql } from "../../db/sql.ts";
import { GatewayError } from "../../errors.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import { enqueueJobsSql, type JobRequest } from "../../jobs/store.ts";
import type { Logger } from "../../logger.ts";
import type { EventPublisher } from "../events/publisher.ts";
import { afterCommit } from "../events/status-machine.ts";
import type { InvoiceChargeInput } from "../transactions/saved-charges.ts";
import type { TransactionService } from "../transactions/service.ts";
import { INVOICE_CHARGE_SETTLED_JOB } from "../transactions/status.ts";
import { periodStart } from "./periods.ts";
import * as store from "./store.ts";
import { invoiceView, subscriptionView } from "./views.ts";

/**
 * The billing cycle: a subscription's period becomes one invoice, an invoice is charged on the customer's saved
 * method through the payments core (one transaction per attempt: transactions/saved-charges.ts), and each charge's
 * outcome is recorded on its invoice once: paid, or failed and retried on the schedule (dunning) until the last
 * failure makes it uncollectible. Each step locks its subscription, then its invoice (always in that order), writes
 * its changes and their events (with their webhook deliveries and follow-up jobs) in one database transaction.
 *
 * Time: a subscription on a test clock (test mode) lives on the clock's frozen time; the clock's advance runs its
 * due steps in order (clocks.ts). Every other one runs on the wall's time, each step a job queued for the moment it falls due.
 */

export const BILL_SUBSCRIPTION_JOB = "subscription.bill";
export const COLLECT_INVOICE_JOB = "invoice.collect";
export const ADVANCE_CLOCK_JOB = "test_clock.advance";

/** Subscriptions billed in one database transaction at most, and in flight per instance. */
const BILL_BATCH_SIZE = 50;
const BILL_CONCURRENCY = 200;

/** Invoices charged side by side in one batch at most, and in flight per instance. */
const COLLECT_BATCH_SIZE = 20;
const COLLECT_CONCURRENCY = 100;

/**
 * While the API is busy, billing keeps a quarter of its slots (webhook backlogs keep a twentieth): a morning's
 * renewals are paid within minutes under a busy API, whose p99 stays within twice its idle one (bench/billing.ts).
 */
const BILLING_BUSY_SHARE = 4;

/** A charge refused before it was made: which attempt, and why. */
type Refusal = { attempt: number; code: string };

/** A charge refused before any payment was made (the method detached meanwhile): an attempt that failed without a charge. */
const REFUSALS_WITHOUT_CHARGE = new Set(["payment_method_detached", "payment_method_not_reusable", "channel_inactive", "forbidden", "not_found", "unsupported_currency", "validation_failed"]);

export interface BillingCycleDeps {
  prisma: PrismaClient;
  /** The steps' transactions and the cycle's batch reads: plain SQL (store.ts). */
  sql: TransactionalSql;
  transactions: Pick<TransactionService, "chargeInvoices" | "checkoutUrl">;
  jobs: JobRunner;
  publisher: EventPublisher;
  logger: Logger;
  /** Delays before each retry of a failed charge, each after the previous attempt. */
  retryScheduleMs: readonly number[];
  /** After the last retry fails: cancel (true) or leave unpaid. */
  cancelUnpaid: boolean;
}

/** Steps asked for before their time (another instance's clock ahead of this one's), by id: when each falls due. */
type NotYet = Map<number, Date>;

/** A wall-time job that ran early runs again when its step falls due. */
const retryWhenDue = (dueAt: Date | undefined) => (dueAt ? { retryInMs: Math.max(1, dueAt.getTime() - Date.now()), countAttempt: false } : undefined);

/** A step's writes: its events (published after commit) and whether it queued jobs (this instance is told). */
interface Step {
  tx: TransactionalSql;
  /** Records events in their order, each with its webhook deliveries. */
  emit(events: store.NewBillingEvent[]): Promise<void>;
  enqueue(jobs: JobRequest[]): Promise<void>;
}

/** The system's own principal for a merchant's billing: what a charge is made as. */
export const billingPrincipal = (owner: { merchantId: number; mode: Principal["mode"] }): Principal => ({
  merchantId: owner.merchantId,
  mode: owner.mode,
  role: "owner",
  userId: null,
  keyId: null,
  keyPrefix: null,
});

export function createBillingCycle(deps: BillingCycleDeps) {
  const { prisma, sql, jobs } = deps;
  const checkoutUrl = deps.transactions.checkoutUrl;

  /** Runs one step in a database transaction; its events reach subscribers, and its jobs this instance, after commit. */
  async function step<T>(run: (s: Step) => Promise<T>): Promise<T> {
    const recorded: Event[] = [];
    let queued = 0;
    const out = await sql.transaction(async (tx) =>
      run({
        tx,
        async emit(events) {
          const { events: rows, deliveriesQueued } = await store.recordEvents(tx, events);
          recorded.push(...rows);
          queued += deliveriesQueued;
        },
        async enqueue(requests) {
          queued += requests.length;
          await enqueueJobsSql(tx, requests);
        },
      }),
    );
    for (const event of recorded) afterCommit(deps, event, 0);
    if (queued) jobs.nudge();
    return out;
  }

  const subscriptionEvent = (sub: store.LinkedSubscription, type: string): store.NewBillingEvent => ({ merchantId: sub.merchantId, mode: sub.mode, type, payload: { subscription: subscriptionView(sub) as Prisma.InputJsonObject } });
  const invoiceEvent = (invoice: store.LinkedInvoice, type: string): store.NewBillingEvent => ({ merchantId: invoice.merchantId, mode: invoice.mode, type, payload: { invoice: invoiceView(invoice, checkoutUrl) as Prisma.InputJsonObject } });
  const emitSubscription = (s: Step, sub: store.LinkedSubscription, type: string) => s.emit([subscriptionEvent(sub, type)]);
  const emitInvoice = (s: Step, invoice: store.LinkedInvoice, type: string) => s.emit([invoiceEvent(invoice, type)]);

  /** The time a subscription or invoice lives on: its test clock's, or the wall's. */
  async function nowOf(testClockId: number | null): Promise<Date> {
    if (testClockId === null) return new Date();
    const clock = await store.clockById(prisma, testClockId);
    return clock?.frozenTime ?? new Date();
  }

  /** On the wall's time, the job that makes the step when it falls due; a clock's steps are run by its advance. */
  const wallJob = (testClockId: number | null, kind: string, payload: Record<string, number>, runAt: Date): JobRequest[] => (testClockId === null ? [{ kind, payload, runAt }] : []);

  /**
   * Invoices each subscription's due period (or ends it, when it was to cancel at period end), once: the row locks and
   * next_invoice_at decide between racing callers, the unique (subscription, period_start) between anything else. Many
   * subscriptions are billed in one database transaction and a few statements (the job's batches); each one's changes
   * and events are the same as when it is billed alone.
   */
  async function billSubscriptions(subscriptionIds: number[], now: Date): Promise<NotYet> {
    return step(async (s) => {
      const locked = await store.lockSubscriptions(s.tx, [...new Set(subscriptionIds)]);
      const due = locked.filter((sub) => sub.nextInvoiceAt && sub.nextInvoiceAt <= now);
      const early: NotYet = new Map(locked.filter((sub) => sub.nextInvoiceAt && sub.nextInvoiceAt > now).map((sub) => [sub.id, sub.nextInvoiceAt!]));
      const events: store.NewBillingEvent[] = [];
      for (const sub of due.filter((sub) => sub.cancelAtPeriodEnd)) {
        const ended = await store.updateSubscription(s.tx, sub.id, { status: "canceled", canceledAt: sub.nextInvoiceAt, nextInvoiceAt: null });
        events.push(subscriptionEvent(ended, "subscription.canceled"));
      }
      const periods = due.filter((sub) => !sub.cancelAtPeriodEnd).map((sub) => ({ sub, start: sub.nextInvoiceAt!, end: periodStart(sub.billingAnchor, sub.plan, sub.periodsBilled + 1) }));
      const { invoices, created } = await store.insertInvoicesForPeriods(
        s.tx,
        periods.map(({ sub, start, end }) => ({
          reference: store.newInvoiceId(),
          merchantId: sub.merchantId,
          mode: sub.mode,
          subscriptionId: sub.id,
          customerId: sub.customerId,
          testClockId: sub.testClockId,
          amountDue: sub.plan.amount,
          currency: sub.plan.currency,
          periodStart: start,
          periodEnd: end,
          nextAttemptAt: start,
        })),
      );
      const renewed = await store.renewSubscriptions(
        s.tx,
        periods.map(({ sub, start, end }) => ({
          id: sub.id,
          status: sub.status === "trialing" ? "active" : sub.status,
          periodsBilled: sub.periodsBilled + 1,
          currentPeriodStart: start,
          currentPeriodEnd: end,
          nextInvoiceAt: end,
        })),
      );
      const invoiceOf = new Map(invoices.map((invoice) => [invoice.subscriptionId, invoice]));
      const renewedOf = new Map(renewed.map((sub) => [sub.id, sub]));
      const jobsToQueue: JobRequest[] = [];
      for (const { sub, end } of periods) {
        const invoice = invoiceOf.get(sub.id)!;
        if (created.has(invoice.id)) events.push(invoiceEvent(invoice, "invoice.created"));
        events.push(subscriptionEvent(renewedOf.get(sub.id)!, "subscription.updated"));
        jobsToQueue.push(
          ...wallJob(sub.testClockId, COLLECT_INVOICE_JOB, { invoiceId: invoice.id }, now),
          ...wallJob(sub.testClockId, BILL_SUBSCRIPTION_JOB, { subscriptionId: sub.id }, end),
        );
      }
      await s.emit(events);
      await s.enqueue(jobsToQueue);
      return early;
    });
  }

  const billSubscription = (subscriptionId: number, now: Date) => billSubscriptions([subscriptionId], now);

  /**
   * Makes each invoice's next charge when it is due, or resumes the one in flight (a crash, a payer still at their
   * bank): through the payments core, once per invoice and attempt, the charges of a batch side by side. Then records
   * what they came to, together. Answers the invoices whose charge failed unexpectedly, with why.
   */
  async function collectInvoices(invoiceIds: number[], now: Date): Promise<{ failed: Map<number, Error>; early: NotYet }> {
    const refused = new Map<number, Refusal>();
    const failed = new Map<number, Error>();
    const early: NotYet = new Map();
    const requests: { principal: Principal; input: InvoiceChargeInput }[] = [];
    for (const invoice of await store.invoicesToCollect(sql, [...new Set(invoiceIds)])) {
      if (invoice.status !== "open") continue;
      const attempt = invoice.attempts + 1;
      const inFlight = invoice.transactions.some((c) => c.invoiceAttempt === attempt);
      if (!inFlight && !invoice.nextAttemptAt) continue;
      if (!inFlight && invoice.nextAttemptAt! > now) {
        early.set(invoice.id, invoice.nextAttemptAt!);
        continue;
      }
      const sub = invoice.subscription;
      requests.push({
        principal: billingPrincipal(invoice),
        input: {
          customer: invoice.customerId,
          paymentMethod: sub.paymentMethod.reference,
          amount: invoice.amountDue,
          currency: invoice.currency,
          description: `${sub.plan.name}: ${invoice.periodStart.toISOString().slice(0, 10)} to ${invoice.periodEnd.toISOString().slice(0, 10)}`.slice(0, 500),
          metadata: { invoice: invoice.reference, subscription: sub.reference },
          invoice: { id: invoice.id, attempt, unmade: !inFlight },
        },
      });
    }
    if (!requests.length) return { failed, early };
    const charged: number[] = [];
    const answers = await deps.transactions.chargeInvoices(requests);
    for (const { input } of requests) {
      const { id, attempt } = input.invoice;
      const answer = answers.get(id);
      if (answer instanceof Error) {
        if (!(answer instanceof GatewayError) || !REFUSALS_WITHOUT_CHARGE.has(answer.code)) {
          failed.set(id, answer);
          continue;
        }
        deps.logger.warn({ invoice: id, code: answer.code }, "invoice charge refused before any payment was made");
        refused.set(id, { attempt, code: answer.code });
      }
      charged.push(id);
    }
    if (charged.length) await recordOutcomes(charged, now, refused);
    return { failed, early };
  }

  async function collectInvoice(invoiceId: number, now: Date): Promise<void> {
    const failed = (await collectInvoices([invoiceId], now)).failed.get(invoiceId);
    if (failed) throw failed;
  }

  /**
   * Records the outcome of each invoice's current attempt, once (the attempt count moves only here, under the locks):
   * a completed charge pays it; a failed one (or a charge refused before it was made, `refused`) schedules the next
   * try, or after the last makes it uncollectible and the subscription unpaid (or canceled). Pending: nothing yet.
   * One database transaction for them all; the payments that leave their subscription as it is are marked paid in one
   * statement.
   */
  async function recordOutcomes(invoiceIds: number[], now: Date, refused: ReadonlyMap<number, Refusal> = new Map()): Promise<void> {
    const owners = await store.invoiceOwners(sql, [...new Set(invoiceIds)]);
    if (!owners.length) return;
    await step(async (s) => {
      // The subscriptions first, then the invoices: the order every step locks them in.
      const subs = new Map((await store.lockSubscriptions(s.tx, [...new Set(owners.map((o) => o.subscriptionId))])).map((sub) => [sub.id, sub]));
      const invoices = await store.lockInvoices(s.tx, owners.map((o) => o.id));
      const invoicesOfSub = new Map<number, number>();
      for (const invoice of invoices) invoicesOfSub.set(invoice.subscriptionId, (invoicesOfSub.get(invoice.subscriptionId) ?? 0) + 1);
      const events: store.NewBillingEvent[] = [];
      const jobsToQueue: JobRequest[] = [];
      const paying: { id: number; attempt: number }[] = [];
      const changeSubscription = async (sub: store.LinkedSubscription, data: store.SubscriptionChange, type: string) => {
        const changed = await store.updateSubscription(s.tx, sub.id, data);
        subs.set(sub.id, changed);
        events.push(subscriptionEvent(changed, type));
      };
      for (const invoice of invoices) {
        const sub = subs.get(invoice.subscriptionId);
        if (!sub) continue;
        const attempt = invoice.attempts + 1;
        const charge = invoice.transactions.find((c) => c.invoiceAttempt === attempt);
        if (charge?.status === "completed" && (invoice.status === "open" || invoice.status === "void")) {
          // Paid, its subscription left as it is (the common case): with the batch's others, below.
          if (sub.status !== "past_due" && invoicesOfSub.get(sub.id) === 1) {
            paying.push({ id: invoice.id, attempt });
            continue;
          }
          const paid = await store.updateInvoice(s.tx, invoice.id, { status: "paid", paidAt: now, attempts: attempt, nextAttemptAt: null });
          events.push(invoiceEvent(paid, "invoice.paid"));
          if (sub.status === "past_due" && !(await store.hasUnpaidFailures(s.tx, sub.id, invoice.id))) await changeSubscription(sub, { status: "active" }, "subscription.updated");
          continue;
        }
        const failed = charge?.status === "failed" || (!charge && refused.get(invoice.id)?.attempt === attempt);
        if (!failed || invoice.status !== "open") continue;
        const last = attempt > deps.retryScheduleMs.length;
        const nextAttemptAt = last ? null : new Date(now.getTime() + deps.retryScheduleMs[attempt - 1]!);
        const updated = await store.updateInvoice(s.tx, invoice.id, { attempts: attempt, nextAttemptAt, ...(last ? { status: "uncollectible" } : {}) });
        events.push(invoiceEvent(updated, "invoice.payment_failed"));
        if (nextAttemptAt) jobsToQueue.push(...wallJob(invoice.testClockId, COLLECT_INVOICE_JOB, { invoiceId: invoice.id }, nextAttemptAt));
        if (sub.status === "canceled") continue;
        if (last) {
          const ends: store.SubscriptionChange = deps.cancelUnpaid ? { status: "canceled", canceledAt: now, nextInvoiceAt: null } : { status: "unpaid", nextInvoiceAt: null };
          await changeSubscription(sub, ends, deps.cancelUnpaid ? "subscription.canceled" : "subscription.updated");
        } else if (sub.status === "active" || sub.status === "trialing") {
          await changeSubscription(sub, { status: "past_due" }, "subscription.updated");
        }
      }
      for (const paid of await store.markInvoicesPaid(s.tx, paying, now)) events.push(invoiceEvent(paid, "invoice.paid"));
      await s.emit(events);
      await s.enqueue(jobsToQueue);
    });
  }

  const recordOutcome = (invoiceId: number, now: Date, refused?: Refusal) => recordOutcomes([invoiceId], now, new Map(refused ? [[invoiceId, refused]] : []));

  /** Ends the subscription now: no more periods, its open invoices no charge is pending for are voided. */
  async function cancelNow(subscriptionId: number, now: Date): Promise<store.LinkedSubscription | null> {
    return step(async (s) => {
      const sub = await store.lockSubscription(s.tx, subscriptionId);
      if (!sub || sub.status === "canceled") return sub;
      const canceled = await store.updateSubscription(s.tx, sub.id, { status: "canceled", canceledAt: now, nextInvoiceAt: null, cancelAtPeriodEnd: false });
      for (const invoice of await store.openInvoicesOf(s.tx, sub.id)) {
        if (invoice.transactions.some((c) => c.status === "pending")) continue;
        await store.updateInvoice(s.tx, invoice.id, { status: "void", nextAttemptAt: null });
      }
      await emitSubscription(s, canceled, "subscription.canceled");
      return canceled;
    });
  }

  /** Marks the subscription to end when its current period does (no further invoice), or takes that back. */
  async function setCancelAtPeriodEnd(subscriptionId: number, cancel: boolean): Promise<store.LinkedSubscription | null> {
    return step(async (s) => {
      const sub = await store.lockSubscription(s.tx, subscriptionId);
      if (!sub || sub.status === "canceled" || sub.cancelAtPeriodEnd === cancel) return sub;
      const changed = await store.updateSubscription(s.tx, sub.id, { cancelAtPeriodEnd: cancel });
      await emitSubscription(s, changed, "subscription.updated");
      return changed;
    });
  }

  /** A new subscription, with its subscription.created event and the job that bills its first period when it starts. */
  async function createSubscription(data: store.NewSubscription): Promise<store.LinkedSubscription> {
    return step(async (s) => {
      const sub = await store.insertSubscription(s.tx, data);
      await emitSubscription(s, sub, "subscription.created");
      const firstAt = sub.nextInvoiceAt!;
      await s.enqueue(
        sub.testClockId === null
          ? [{ kind: BILL_SUBSCRIPTION_JOB, payload: { subscriptionId: sub.id }, runAt: firstAt }]
          : [{ kind: ADVANCE_CLOCK_JOB, payload: { clockId: sub.testClockId } }],
      );
      return sub;
    });
  }

  // In batches: a thousand subscriptions due in the same minute are a few dozen database transactions, not a thousand.
  jobs.register<{ subscriptionId: number }>({
    kind: BILL_SUBSCRIPTION_JOB,
    busyShare: BILLING_BUSY_SHARE,
    concurrency: BILL_CONCURRENCY,
    batchSize: BILL_BATCH_SIZE,
    runBatch: async (batch) => {
      const early = await billSubscriptions(batch.map(({ payload }) => Number(payload.subscriptionId)), new Date());
      return batch.map(({ payload }) => retryWhenDue(early.get(Number(payload.subscriptionId))));
    },
  });
  jobs.register<{ invoiceId: number }>({
    kind: COLLECT_INVOICE_JOB,
    busyShare: BILLING_BUSY_SHARE,
    concurrency: COLLECT_CONCURRENCY,
    batchSize: COLLECT_BATCH_SIZE,
    runBatch: async (batch) => {
      const { failed, early } = await collectInvoices(batch.map(({ payload }) => Number(payload.invoiceId)), new Date());
      return batch.map(({ payload }) => failed.get(Number(payload.invoiceId)) ?? retryWhenDue(early.get(Number(payload.invoiceId))));
    },
    // A charge that kept failing before it could be made (the provider unreachable, every retry): the attempt counts as
    // failed, so the invoice moves on through its schedule instead of waiting on a job that is gone. A charge that was
    // made is left to its own settling (an attempt is recorded as refused only when it has no payment).
    async onGiveUp({ invoiceId }) {
      const invoice = await prisma.invoice.findUnique({ where: { id: Number(invoiceId) }, select: { attempts: true, testClockId: true } });
      if (invoice) await recordOutcome(Number(invoiceId), await nowOf(invoice.testClockId), { attempt: invoice.attempts + 1, code: "charge_error" });
    },
  });
  jobs.register<{ invoiceId: number }>({
    kind: INVOICE_CHARGE_SETTLED_JOB,
    busyShare: BILLING_BUSY_SHARE,
    concurrency: COLLECT_CONCURRENCY,
    batchSize: COLLECT_BATCH_SIZE,
    runBatch: async (batch) => {
      // Each invoice on its own time: the wall's, or its clock's.
      const byClock = new Map<number | null, number[]>();
      for (const owner of await store.invoiceOwners(sql, batch.map(({ payload }) => Number(payload.invoiceId)))) {
        byClock.set(owner.testClockId, [...(byClock.get(owner.testClockId) ?? []), owner.id]);
      }
      for (const [clockId, ids] of byClock) await recordOutcomes(ids, await nowOf(clockId));
      return batch.map(() => undefined);
    },
  });

  return { billSubscription, collectInvoice, recordOutcome, cancelNow, setCancelAtPeriodEnd, createSubscription, nowOf };
}

export type BillingCycle = ReturnType<typeof createBillingCycle>;
