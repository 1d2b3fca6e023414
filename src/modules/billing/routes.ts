import { bool, body, dateTime, envelope, int, list, nullable, obj, oneOfStrings, pageQuery, schemas, str } from "../../openapi/schemas.ts";
import { ValidationError } from "../../errors.ts";
import { boolField, intField, intParam, required, stringField, stringParam } from "../../rest/params.ts";
import { graphql } from "../../rest/gql/index.ts";
import type { V1InvoiceFragment, V1PlanFragment, V1SubscriptionFragment, V1TestClockFragment } from "../../rest/gql/graphql.ts";
import { defineRoute, pageBody } from "../../rest/route-table.ts";
import { INVOICE_STATUSES, PLAN_INTERVALS, SUBSCRIPTION_STATUSES } from "./service.ts";

/** /v1 plans, subscriptions, invoices and test clocks over the GraphQL operations frontends use, in the {"status":"success","data":...} envelope. */
graphql(`fragment V1Plan on Plan { id name amount currency interval intervalCount trialDays metadata createdAt }`);
graphql(`
  fragment V1Subscription on BillingSubscription {
    id customerId status trialEnd currentPeriodStart currentPeriodEnd cancelAtPeriodEnd canceledAt nextInvoiceAt metadata createdAt
    plan { id amount currency } paymentMethod { id } testClock { id }
  }
`);
graphql(`
  fragment V1Invoice on Invoice {
    id customerId amountDue currency periodStart periodEnd status attempts nextAttemptAt paidAt transactionReference createdAt
    subscription { id } charges { attempt transactionReference status failureCode createdAt } nextAction { type url }
  }
`);
graphql(`fragment V1TestClock on TestClock { id name frozenTime status createdAt }`);

const toV1Plan = (p: V1PlanFragment) => ({
  id: p.id,
  name: p.name,
  amount: p.amount,
  currency: p.currency,
  interval: p.interval,
  interval_count: p.intervalCount,
  trial_days: p.trialDays,
  metadata: p.metadata ?? null,
  created_at: p.createdAt,
});

/** Key for key as views.ts's subscriptionView, which webhooks carry. */
const toV1Subscription = (s: V1SubscriptionFragment) => ({
  id: s.id,
  customer: s.customerId,
  plan: s.plan.id,
  payment_method: s.paymentMethod.id,
  status: s.status,
  amount: s.plan.amount,
  currency: s.plan.currency,
  trial_end: s.trialEnd,
  current_period_start: s.currentPeriodStart,
  current_period_end: s.currentPeriodEnd,
  cancel_at_period_end: s.cancelAtPeriodEnd,
  canceled_at: s.canceledAt,
  next_invoice_at: s.nextInvoiceAt,
  test_clock: s.testClock?.id ?? null,
  metadata: s.metadata ?? null,
  created_at: s.createdAt,
});

/** Key for key as views.ts's invoiceView, which webhooks carry. */
const toV1Invoice = (i: V1InvoiceFragment) => ({
  id: i.id,
  subscription: i.subscription.id,
  customer: i.customerId,
  amount_due: i.amountDue,
  currency: i.currency,
  period_start: i.periodStart,
  period_end: i.periodEnd,
  status: i.status,
  attempts: i.attempts,
  next_attempt_at: i.nextAttemptAt,
  paid_at: i.paidAt,
  transaction_reference: i.transactionReference,
  charges: i.charges.map((c) => ({ attempt: c.attempt, transaction_reference: c.transactionReference, status: c.status, failure_code: c.failureCode, created_at: c.createdAt })),
  next_action: i.nextAction ? { type: i.nextAction.type, url: i.nextAction.url } : null,
  created_at: i.createdAt,
});

const toV1TestClock = (c: V1TestClockFragment) => ({ id: c.id, name: c.name, frozen_time: c.frozenTime, status: c.status, created_at: c.createdAt });

const json = { type: "object", description: "Your own JSON object, at most 8 KB" };
const planSchema = obj({
  id: str("pln_..."),
  name: str(),
  amount: int("Minor units, each period", { minimum: 1 }),
  currency: str(),
  interval: oneOfStrings([...PLAN_INTERVALS]),
  interval_count: int("Intervals per period", { minimum: 1 }),
  trial_days: int(undefined, { minimum: 0 }),
  metadata: nullable(json),
  created_at: dateTime(),
});
const subscriptionSchema = obj({
  id: str("sub_..."),
  customer: int("The customer's id"),
  plan: str("pln_..."),
  payment_method: str("pm_..."),
  status: oneOfStrings([...SUBSCRIPTION_STATUSES]),
  amount: int("The plan's amount, each period"),
  currency: str(),
  trial_end: nullable(dateTime()),
  current_period_start: dateTime(),
  current_period_end: dateTime(),
  cancel_at_period_end: bool(),
  canceled_at: nullable(dateTime()),
  next_invoice_at: nullable(dateTime("When the next period is invoiced; null once it bills no more")),
  test_clock: nullable(str("clock_...")),
  metadata: nullable(json),
  created_at: dateTime(),
});
const invoiceSchema = obj({
  id: str("in_..."),
  subscription: str("sub_..."),
  customer: int("The customer's id"),
  amount_due: int("Minor units", { minimum: 1 }),
  currency: str(),
  period_start: dateTime(),
  period_end: dateTime(),
  status: oneOfStrings([...INVOICE_STATUSES], "open -> paid | uncollectible | void"),
  attempts: int("Charges whose outcome is recorded", { minimum: 0 }),
  next_attempt_at: nullable(dateTime()),
  paid_at: nullable(dateTime()),
  transaction_reference: nullable(str("The latest charge's transaction")),
  charges: list(obj({ attempt: int(), transaction_reference: str(), status: oneOfStrings(["pending", "completed", "failed"]), failure_code: nullable(str()), created_at: dateTime() })),
  next_action: nullable(obj({ type: oneOfStrings(["redirect"]), url: str("The checkout page where the payer finishes") })),
  created_at: dateTime(),
});
const testClockSchema = obj({ id: str("clock_..."), name: nullable(str()), frozen_time: dateTime(), status: oneOfStrings(["ready", "advancing"]), created_at: dateTime() });

/** Checked here so the 400 names the REST parameter (GraphQL would report the enum variable). */
function enumParam<T extends string>(query: Record<string, unknown>, name: string, values: readonly T[]): T | undefined {
  const value = stringParam(query, name);
  if (value !== undefined && !(values as readonly string[]).includes(value)) throw new ValidationError(name, `must be one of ${values.join(", ")}`);
  return value as T | undefined;
}

const success = <T>(data: T, statusCode = 200) => ({ statusCode, body: { status: "success", data } });

export const billingRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/plans",
    doc: {
      operationId: "createPlan",
      summary: "Create a plan: what a subscription bills each period (immutable: a new price is a new plan)",
      tag: "Billing",
      body: body({ name: str(), amount: int("Minor units", { minimum: 1 }), currency: str(), interval: oneOfStrings([...PLAN_INTERVALS]), interval_count: int("Default 1", { minimum: 1 }), trial_days: int("Default 0", { minimum: 0 }), metadata: json }, ["name", "amount", "currency", "interval"]),
      status: 201,
      response: envelope({ data: planSchema }),
    },
    operation: graphql(`mutation V1CreatePlan($input: CreatePlanInput!) { createPlan(input: $input) { __typename ... on Error { code message } ... on Plan { ...V1Plan } } }`),
    variables: ({ body }) => ({
      input: {
        name: required(stringField(body, "name"), "name"),
        amount: required(intField(body, "amount"), "amount"),
        currency: required(stringField(body, "currency"), "currency"),
        interval: required(stringField(body, "interval"), "interval"),
        intervalCount: intField(body, "interval_count"),
        trialDays: intField(body, "trial_days"),
        metadata: body.metadata ?? undefined,
      },
    }),
    respond: (data) => success(toV1Plan(data.createPlan), 201),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/plans",
    doc: { operationId: "listPlans", summary: "The merchant's plans, newest first", tag: "Billing", query: { ...pageQuery }, response: envelope({ data: list(planSchema), ...schemas.page }) },
    operation: graphql(`
      query V1ListPlans($page: Int, $limit: Int) {
        plansPage(page: $page, limit: $limit) { __typename ... on Error { code message } ... on PlanPage { total page limit pages items { ...V1Plan } } }
      }
    `),
    variables: ({ query }) => ({ page: intParam(query, "page"), limit: intParam(query, "limit") }),
    respond: (data) => pageBody(data.plansPage, toV1Plan),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/plans/:id",
    doc: { operationId: "getPlan", summary: "One plan (pln_...)", tag: "Billing", response: envelope({ data: planSchema }), errors: [404] },
    operation: graphql(`query V1Plan($id: String!) { plan(id: $id) { __typename ... on Error { code message } ... on Plan { ...V1Plan } } }`),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => success(toV1Plan(data.plan)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/subscriptions",
    doc: {
      operationId: "createSubscription",
      summary: "Subscribe a customer to a plan on one of its saved payment methods; its first period is billed when it starts (after the trial, if any)",
      tag: "Billing",
      body: body({ customer: int("The customer's id"), plan: str("pln_..."), payment_method: str("pm_..."), start_at: dateTime("Default now (the customer's test clock's now)"), metadata: json }, ["customer", "plan", "payment_method"]),
      status: 201,
      response: envelope({ data: subscriptionSchema }),
      errors: [404, 409],
    },
    operation: graphql(`
      mutation V1CreateSubscription($input: CreateSubscriptionInput!) {
        createSubscription(input: $input) { __typename ... on Error { code message } ... on BillingSubscription { ...V1Subscription } }
      }
    `),
    variables: ({ body }) => ({
      input: {
        customer: required(intField(body, "customer"), "customer"),
        plan: required(stringField(body, "plan"), "plan"),
        paymentMethod: required(stringField(body, "payment_method"), "payment_method"),
        startAt: stringField(body, "start_at"),
        metadata: body.metadata ?? undefined,
      },
    }),
    respond: (data) => success(toV1Subscription(data.createSubscription), 201),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/subscriptions",
    doc: {
      operationId: "listSubscriptions",
      summary: "The merchant's subscriptions, newest first",
      tag: "Billing",
      query: {
        ...pageQuery,
        status: { description: SUBSCRIPTION_STATUSES.join(", "), schema: oneOfStrings([...SUBSCRIPTION_STATUSES]) },
        customer: { description: "The customer's id", schema: int() },
        plan: { description: "pln_...", schema: str() },
      },
      response: envelope({ data: list(subscriptionSchema), ...schemas.page }),
    },
    operation: graphql(`
      query V1ListSubscriptions($page: Int, $limit: Int, $status: SubscriptionStatus, $customer: Int, $plan: String) {
        subscriptionsPage(page: $page, limit: $limit, status: $status, customer: $customer, plan: $plan) {
          __typename ... on Error { code message } ... on SubscriptionPage { total page limit pages items { ...V1Subscription } }
        }
      }
    `),
    variables: ({ query }) => ({
      page: intParam(query, "page"),
      limit: intParam(query, "limit"),
      status: enumParam(query, "status", SUBSCRIPTION_STATUSES),
      customer: intParam(query, "customer"),
      plan: stringParam(query, "plan"),
    }),
    respond: (data) => pageBody(data.subscriptionsPage, toV1Subscription),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/subscriptions/:id",
    doc: { operationId: "getSubscription", summary: "One subscription (sub_...)", tag: "Billing", response: envelope({ data: subscriptionSchema }), errors: [404] },
    operation: graphql(`query V1Subscription($id: String!) { subscription(id: $id) { __typename ... on Error { code message } ... on BillingSubscription { ...V1Subscription } } }`),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => success(toV1Subscription(data.subscription)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/subscriptions/:id/cancel",
    doc: {
      operationId: "cancelSubscription",
      summary: "Cancel a subscription: at_period_end true ends it when the current period does; false (default) now, its open invoices voided",
      tag: "Billing",
      body: body({ at_period_end: bool("Default false") }, []),
      response: envelope({ data: subscriptionSchema }),
      errors: [404],
    },
    operation: graphql(`
      mutation V1CancelSubscription($id: String!, $atPeriodEnd: Boolean) {
        cancelSubscription(id: $id, atPeriodEnd: $atPeriodEnd) { __typename ... on Error { code message } ... on BillingSubscription { ...V1Subscription } }
      }
    `),
    variables: ({ params, body }) => ({ id: params.id, atPeriodEnd: boolField(body, "at_period_end") }),
    respond: (data) => success(toV1Subscription(data.cancelSubscription)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/invoices",
    doc: {
      operationId: "listInvoices",
      summary: "The merchant's subscription invoices, newest first",
      tag: "Billing",
      query: {
        ...pageQuery,
        status: { description: INVOICE_STATUSES.join(", "), schema: oneOfStrings([...INVOICE_STATUSES]) },
        subscription: { description: "sub_...", schema: str() },
        customer: { description: "The customer's id", schema: int() },
      },
      response: envelope({ data: list(invoiceSchema), ...schemas.page }),
    },
    operation: graphql(`
      query V1ListInvoices($page: Int, $limit: Int, $status: InvoiceStatus, $subscription: String, $customer: Int) {
        invoicesPage(page: $page, limit: $limit, status: $status, subscription: $subscription, customer: $customer) {
          __typename ... on Error { code message } ... on InvoicePage { total page limit pages items { ...V1Invoice } }
        }
      }
    `),
    variables: ({ query }) => ({
      page: intParam(query, "page"),
      limit: intParam(query, "limit"),
      status: enumParam(query, "status", INVOICE_STATUSES),
      subscription: stringParam(query, "subscription"),
      customer: intParam(query, "customer"),
    }),
    respond: (data) => pageBody(data.invoicesPage, toV1Invoice),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/invoices/:id",
    doc: { operationId: "getInvoice", summary: "One invoice (in_...)", tag: "Billing", response: envelope({ data: invoiceSchema }), errors: [404] },
    operation: graphql(`query V1Invoice($id: String!) { invoice(id: $id) { __typename ... on Error { code message } ... on Invoice { ...V1Invoice } } }`),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => success(toV1Invoice(data.invoice)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/test-clocks",
    doc: {
      operationId: "createTestClock",
      summary: "Create a test clock (test mode only): customers created on it bill on its time",
      tag: "Billing",
      body: body({ frozen_time: dateTime(), name: str() }, ["frozen_time"]),
      status: 201,
      response: envelope({ data: testClockSchema }),
      errors: [403],
    },
    operation: graphql(`
      mutation V1CreateTestClock($frozenTime: String!, $name: String) {
        createTestClock(frozenTime: $frozenTime, name: $name) { __typename ... on Error { code message } ... on TestClock { ...V1TestClock } }
      }
    `),
    variables: ({ body }) => ({ frozenTime: required(stringField(body, "frozen_time"), "frozen_time"), name: stringField(body, "name") }),
    respond: (data) => success(toV1TestClock(data.createTestClock), 201),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/test-clocks/:id",
    doc: { operationId: "getTestClock", summary: "One test clock (clock_...): status advancing until what fell due has run, then ready", tag: "Billing", response: envelope({ data: testClockSchema }), errors: [403, 404] },
    operation: graphql(`query V1TestClock($id: String!) { testClock(id: $id) { __typename ... on Error { code message } ... on TestClock { ...V1TestClock } } }`),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => success(toV1TestClock(data.testClock)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/test-clocks/:id/advance",
    doc: {
      operationId: "advanceTestClock",
      summary: "Move a test clock forward (only forward): everything due up to then runs, in order; status advancing until done",
      tag: "Billing",
      body: body({ frozen_time: dateTime() }, ["frozen_time"]),
      response: envelope({ data: testClockSchema }),
      errors: [403, 404, 409],
    },
    operation: graphql(`
      mutation V1AdvanceTestClock($id: String!, $frozenTime: String!) {
        advanceTestClock(id: $id, frozenTime: $frozenTime) { __typename ... on Error { code message } ... on TestClock { ...V1TestClock } }
      }
    `),
    variables: ({ params, body }) => ({ id: params.id, frozenTime: required(stringField(body, "frozen_time"), "frozen_time") }),
    respond: (data) => success(toV1TestClock(data.advanceTestClock)),
  }),
  defineRoute({
    method: "DELETE",
    path: "/v1/test-clocks/:id",
    doc: { operationId: "deleteTestClock", summary: "Delete a test clock; its subscriptions are canceled first", tag: "Billing", response: envelope({ data: testClockSchema }), errors: [403, 404] },
    operation: graphql(`mutation V1DeleteTestClock($id: String!) { deleteTestClock(id: $id) { __typename ... on Error { code message } ... on TestClock { ...V1TestClock } } }`),
    variables: ({ params }) => ({ id: params.id }),
    respond: (data) => success(toV1TestClock(data.deleteTestClock)),
  }),
];
