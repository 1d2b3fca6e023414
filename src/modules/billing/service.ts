import { z } from "zod";
import type { Principal } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { Prisma } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import { enqueue } from "../../jobs/store.ts";
import { amountSchema, currencies } from "../../money.ts";
import { filteredList } from "../../paging.ts";
import { parseInput } from "../../validation.ts";
import type { CustomerService } from "../customers/service.ts";
import type { PaymentMethodService } from "../payment-methods/service.ts";
import { metadataSchema } from "../transactions/initialize.ts";
import { createClockRunner } from "./clocks.ts";
import { ADVANCE_CLOCK_JOB, createBillingCycle, type BillingCycleDeps } from "./cycle.ts";
import { PLAN_INTERVALS, periodStart } from "./periods.ts";
import * as store from "./store.ts";

export { PLAN_INTERVALS };
export { INVOICE_STATUSES, SUBSCRIPTION_STATUSES } from "./store.ts";

/**
 * Recurring billing: plans, subscriptions on a customer's saved payment method, their invoices, and test clocks.
 * The rules of the cycle itself (a period's invoice, its charges, dunning) are in cycle.ts; this is what the API asks.
 */

export interface BillingServiceDeps extends BillingCycleDeps {
  /** Where lists read (a replica when there is one). */
  read: PrismaClient;
  customers: CustomerService;
  paymentMethods: PaymentMethodService;
}

const DAY_MS = 86_400_000;
/** Ten years of the shortest interval is enough; a larger count is a typo. */
const MAX_INTERVAL_COUNT = 365;
const MAX_TRIAL_DAYS = 730;

const isoTime = (field: string) =>
  z
    .string({ error: "is required" })
    .refine((v) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/.test(v) && !Number.isNaN(Date.parse(v)), `${field} must be an ISO 8601 time with its zone, e.g. 2027-01-31T09:00:00Z`)
    .transform((v) => new Date(v));

const planInput = z.object({
  name: z.string({ error: "is required" }).trim().min(1, "is required").max(200, "must be at most 200 characters"),
  amount: amountSchema,
  currency: z.string({ error: "is required" }).trim().toUpperCase().refine((c) => c in currencies, "is not a currency the gateway knows"),
  interval: z.enum(PLAN_INTERVALS, { error: `must be one of ${PLAN_INTERVALS.join(", ")}` }),
  intervalCount: z.number().int("must be a whole number").min(1, "must be at least 1").max(MAX_INTERVAL_COUNT, `must be at most ${MAX_INTERVAL_COUNT}`).nullish(),
  trialDays: z.number().int("must be a whole number").min(0, "must be 0 or more").max(MAX_TRIAL_DAYS, `must be at most ${MAX_TRIAL_DAYS}`).nullish(),
  metadata: metadataSchema,
});

export interface PlanInput {
  name: string;
  amount: unknown;
  currency: string;
  interval: string;
  intervalCount?: number | null;
  trialDays?: number | null;
  metadata?: unknown;
}

export interface SubscriptionInput {
  customer: number;
  plan: string;
  paymentMethod: string;
  startAt?: string | null;
  metadata?: unknown;
}

export interface SubscriptionListFilters {
  customer?: number | null;
  status?: string | null;
  plan?: string | null;
}
export interface InvoiceListFilters {
  subscription?: string | null;
  customer?: number | null;
  status?: string | null;
}

function oneOf<T extends string>(values: readonly T[], field: string, value: string | null | undefined): T | undefined {
  if (value === null || value === undefined) return undefined;
  if (!(values as readonly string[]).includes(value)) throw new ValidationError(field, `must be one of ${values.join(", ")}`);
  return value as T;
}

const testModeOnly = (principal: Principal) => {
  if (principal.mode !== "test") throw new GatewayError("test_mode_only", "Test clocks exist in test mode only: use a test key");
};

export function createBillingService(deps: BillingServiceDeps) {
  const { prisma, read } = deps;
  const cycle = createBillingCycle(deps);
  createClockRunner({ prisma, jobs: deps.jobs, logger: deps.logger, cycle });

  async function planOf(principal: Principal, reference: string) {
    const plan = await store.findPlan(prisma, principal, reference);
    if (!plan) throw new NotFoundError(`Plan ${reference}`);
    return plan;
  }
  async function subscriptionOf(principal: Principal, reference: string) {
    const sub = await store.findSubscription(prisma, principal, reference);
    if (!sub) throw new NotFoundError(`Subscription ${reference}`);
    return sub;
  }
  async function clockOf(principal: Principal, reference: string) {
    testModeOnly(principal);
    const clock = await store.findClock(prisma, principal, reference);
    if (!clock) throw new NotFoundError(`Test clock ${reference}`);
    return clock;
  }

  /** The list filters as the store takes them: an unknown plan or subscription matches nothing. */
  async function subscriptionFilters(principal: Principal, f: SubscriptionListFilters): Promise<store.SubscriptionFilters | null> {
    const status = oneOf(store.SUBSCRIPTION_STATUSES, "status", f.status);
    const plan = f.plan ? await store.findPlan(read, principal, f.plan) : undefined;
    if (plan === null) return null;
    return { ...(f.customer != null ? { customerId: f.customer } : {}), ...(status ? { status } : {}), ...(plan ? { planId: plan.id } : {}) };
  }
  async function invoiceFilters(principal: Principal, f: InvoiceListFilters): Promise<store.InvoiceFilters | null> {
    const status = oneOf(store.INVOICE_STATUSES, "status", f.status);
    const sub = f.subscription ? await store.findSubscription(read, principal, f.subscription) : undefined;
    if (sub === null) return null;
    return { ...(f.customer != null ? { customerId: f.customer } : {}), ...(status ? { status } : {}), ...(sub ? { subscriptionId: sub.id } : {}) };
  }

  /** A paged list over a store list, its filters resolved first. */
  const pagedList = <Row, Input, Filters>(list: ReturnType<typeof store.listOf<Row, Filters>>, filtersOf: (principal: Principal, input: Input) => Promise<Filters | null>) =>
    filteredList<Row, Input, Filters>(filtersOf, {
      page: (principal, filters, paging, query) => list.page(read, principal, filters, paging, query),
      slice: (principal, filters, query) => list.slice(read, principal, filters, query),
      count: (principal, filters) => list.count(read, principal, filters),
    });

  return {
    cycle,
    plans: pagedList(store.planList, async () => ({})),
    subscriptions: pagedList(store.subscriptionList, subscriptionFilters),
    invoices: pagedList(store.invoiceList, invoiceFilters),

    async createPlan(principal: Principal, input: PlanInput) {
      const plan = parseInput(planInput, input);
      return store.insertPlan(prisma, {
        merchantId: principal.merchantId,
        mode: principal.mode,
        reference: store.newPlanId(),
        name: plan.name,
        amount: plan.amount,
        currency: plan.currency,
        interval: plan.interval,
        intervalCount: plan.intervalCount ?? 1,
        trialDays: plan.trialDays ?? 0,
        ...(plan.metadata ? { metadata: plan.metadata as Prisma.InputJsonObject } : {}),
      });
    },
    plan: planOf,

    /**
     * Subscribes a customer to a plan on one of its saved methods. It bills its first period when it starts
     * (start_at, default now on the customer's clock), or when its trial ends.
     */
    async createSubscription(principal: Principal, input: SubscriptionInput) {
      const customer = await deps.customers.getCustomer(principal, input.customer);
      const plan = await planOf(principal, input.plan);
      const { method } = await deps.paymentMethods.chargeable(principal, input.paymentMethod, customer.id);
      const metadata = parseInput(z.object({ metadata: metadataSchema }), { metadata: input.metadata }).metadata;
      const now = await cycle.nowOf(customer.testClockId);
      const startAt = input.startAt ? parseInput(z.object({ start_at: isoTime("start_at") }), { start_at: input.startAt }).start_at : now;
      // A minute's grace for clocks that differ: billing periods that have already passed is not what anyone means.
      if (startAt.getTime() < now.getTime() - 60_000) throw new ValidationError("start_at", "must not be in the past");
      const trialEnd = plan.trialDays > 0 ? new Date(startAt.getTime() + plan.trialDays * DAY_MS) : null;
      const anchor = trialEnd ?? startAt;
      return cycle.createSubscription({
        merchantId: principal.merchantId,
        mode: principal.mode,
        reference: store.newSubscriptionId(),
        customerId: customer.id,
        planId: plan.id,
        paymentMethodId: method.id,
        testClockId: customer.testClockId,
        status: trialEnd ? "trialing" : "active",
        billingAnchor: anchor,
        trialEnd,
        currentPeriodStart: startAt,
        currentPeriodEnd: trialEnd ?? periodStart(anchor, plan, 1),
        nextInvoiceAt: anchor,
        ...(metadata ? { metadata: metadata as Prisma.InputJsonObject } : {}),
      });
    },

    async subscription(principal: Principal, reference: string) {
      return store.linkedSubscription(prisma, (await subscriptionOf(principal, reference)).id);
    },

    /** at_period_end: it ends when the current period does (no further invoice); otherwise now, its open invoices voided. */
    async cancelSubscription(principal: Principal, reference: string, atPeriodEnd: boolean) {
      const sub = await subscriptionOf(principal, reference);
      // An unpaid subscription bills no more periods: ending it "at period end" ends it now.
      const now = atPeriodEnd && sub.nextInvoiceAt ? null : await cycle.nowOf(sub.testClockId);
      const changed = now ? await cycle.cancelNow(sub.id, now) : await cycle.setCancelAtPeriodEnd(sub.id, true);
      return changed ?? store.linkedSubscription(prisma, sub.id);
    },

    async invoice(principal: Principal, reference: string) {
      const invoice = await store.findInvoice(prisma, principal, reference);
      if (!invoice) throw new NotFoundError(`Invoice ${reference}`);
      return invoice;
    },

    // ---- Test clocks ----

    async createTestClock(principal: Principal, input: { frozenTime: string; name?: string | null }) {
      testModeOnly(principal);
      const { frozen_time, name } = parseInput(z.object({ frozen_time: isoTime("frozen_time"), name: z.string().trim().max(200).nullish() }), { frozen_time: input.frozenTime, name: input.name });
      return store.insertClock(prisma, { merchantId: principal.merchantId, mode: principal.mode, reference: store.newTestClockId(), frozenTime: frozen_time, name: name || null });
    },

    testClock: clockOf,

    /** Moves the clock forward and runs everything due up to then, in order (status advancing until done). */
    async advanceTestClock(principal: Principal, reference: string, frozenTime: string) {
      const clock = await clockOf(principal, reference);
      const { frozen_time: to } = parseInput(z.object({ frozen_time: isoTime("frozen_time") }), { frozen_time: frozenTime });
      if (clock.status === "advancing") throw new GatewayError("test_clock_advancing", `Test clock ${reference} is still advancing; wait until its status is ready`);
      if (to <= clock.frozenTime) throw new ValidationError("frozen_time", `must be later than the clock's time (${clock.frozenTime.toISOString()}): clocks only go forward`);
      const moved = await store.startAdvance(prisma, clock.id, to);
      if (!moved) throw new GatewayError("test_clock_advancing", `Test clock ${reference} is still advancing; wait until its status is ready`);
      await enqueue(prisma, ADVANCE_CLOCK_JOB, { clockId: clock.id });
      deps.jobs.nudge();
      return moved;
    },

    /** Deletes the clock; its subscriptions end (canceled) first. */
    async deleteTestClock(principal: Principal, reference: string) {
      const clock = await clockOf(principal, reference);
      for (const { id } of await store.subscriptionsOnClock(prisma, clock.id)) await cycle.cancelNow(id, clock.frozenTime);
      await store.deleteClock(prisma, clock.id);
      return clock;
    },

    /** The clock a new customer lives on (POST /v1/customers' test_clock): test mode only. */
    async clockIdOf(principal: Principal, reference: string): Promise<number> {
      return (await clockOf(principal, reference)).id;
    },
  };
}

export type BillingService = ReturnType<typeof createBillingService>;
