import {
  buildClientSchema,
  getIntrospectionQuery,
  getNamedType,
  isEnumType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  parse,
  type GraphQLField,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  type IntrospectionQuery,
} from "graphql";
import { describe, expect, it } from "vitest";
import { withGateways } from "../support/fixture.ts";
import { apiClient, createSandboxMerchant, SANDBOX_CARD, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { collect, listeningTo, sseSubscribe, wsClient } from "../support/subscriptions.ts";
import { until, waitUntil } from "../support/wait.ts";

/**
 * Issue 35 item 13: every field of every subscription payload resolves, for an event produced on another instance
 * (it arrives through Redis as JSON). The documents are built from the running server's schema (introspection):
 * per Subscription root field, every leaf field of its payload type, recursively through object fields. A
 * subscription added later without a scenario here fails the first test.
 */

/** Object levels below the root field's type; enough for TransactionEvent > transaction > refunds > fields. */
const MAX_DEPTH = 4;

/** A selection: field name -> its sub-selection (null for a leaf). */
type Selection = Map<string, Selection | null>;

/**
 * Every leaf field of `type`, and every object field's own selection; an object type already on the path (a cycle,
 * e.g. Transaction.events -> TransactionEvent) or beyond MAX_DEPTH contributes its leaf fields only.
 */
function selectAll(type: GraphQLObjectType, path: readonly string[]): Selection {
  const selection: Selection = new Map();
  const leavesOnly = path.includes(type.name) || path.length >= MAX_DEPTH;
  for (const field of Object.values(type.getFields())) {
    // No payload field takes an argument today; one that needs a value would need a sane choice here.
    if (field.args.some((arg) => isNonNullType(arg.type) && arg.defaultValue === undefined)) throw new Error(`${type.name}.${field.name} needs arguments`);
    const named = getNamedType(field.type);
    if (isLeafType(named)) selection.set(field.name, null);
    else if (isObjectType(named) && !leavesOnly) {
      const inner = selectAll(named, [...path, type.name]);
      if (inner.size > 0) selection.set(field.name, inner);
    }
  }
  return selection;
}

const render = (selection: Selection): string =>
  [...selection].map(([name, inner]) => (inner ? `${name} { ${render(inner)} }` : name)).join(" ");

const count = (selection: Selection): number => [...selection.values()].reduce((n, inner) => n + (inner ? count(inner) : 1), 0);

/** The subscription document for one root field: `ready: true` when it takes it, variables for its required arguments. */
function documentFor(field: GraphQLField<unknown, unknown>): { query: string; selection: Selection } {
  const payload = getNamedType(field.type) as GraphQLObjectType;
  const selection = selectAll(payload, []);
  const required = field.args.filter((arg) => isNonNullType(arg.type) && arg.defaultValue === undefined);
  const variables = required.map((arg) => `$${arg.name}: ${arg.type.toString()}`).join(", ");
  const args = [...required.map((arg) => `${arg.name}: $${arg.name}`), ...(field.args.some((arg) => arg.name === "ready") ? ["ready: true"] : [])].join(", ");
  const query = `subscription EveryField${variables ? `(${variables})` : ""} { ${field.name}${args ? `(${args})` : ""} { ${render(selection)} } }`;
  return { query, selection };
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Whether a JSON value is what the schema's scalar serializes to. */
function scalarProblem(name: string, value: unknown): string | null {
  switch (name) {
    case "String":
    case "ID":
      return typeof value === "string" ? null : "a string";
    case "Int":
      return Number.isInteger(value) && Math.abs(value as number) <= 2 ** 31 ? null : "a 32-bit integer";
    case "Float":
      return typeof value === "number" ? null : "a number";
    case "Boolean":
      return typeof value === "boolean" ? null : "a boolean";
    case "BigInt": // a JSON number (builder.ts)
      return Number.isSafeInteger(value) ? null : "a safe integer";
    case "DateTime":
      return typeof value === "string" && ISO_TIME.test(value) && !Number.isNaN(Date.parse(value)) ? null : "an ISO 8601 time";
    case "JSON":
      return null;
    default:
      return `a known scalar (${name} is not: add it to this test)`;
  }
}

/** Every way `value` differs from what `type` and `selection` promise: a missing field, a null non-null, a wrong type. */
function problemsOf(value: unknown, type: GraphQLOutputType, selection: Selection | null, path: string, out: string[] = []): string[] {
  if (value === undefined) {
    out.push(`${path}: missing`);
    return out;
  }
  if (isNonNullType(type)) {
    if (value === null) out.push(`${path}: null, but ${type.toString()}`);
    else problemsOf(value, type.ofType, selection, path, out);
    return out;
  }
  if (value === null) return out;
  if (isListType(type)) {
    if (!Array.isArray(value)) out.push(`${path}: not a list`);
    else value.forEach((item, i) => problemsOf(item, type.ofType, selection, `${path}[${i}]`, out));
  } else if (isObjectType(type)) {
    if (typeof value !== "object" || Array.isArray(value)) out.push(`${path}: not an object`);
    else for (const [name, inner] of selection!) problemsOf((value as Record<string, unknown>)[name], type.getFields()[name]!.type, inner, `${path}.${name}`, out);
  } else if (isEnumType(type)) {
    if (!type.getValues().some((v) => v.name === value)) out.push(`${path}: ${JSON.stringify(value)} is not a ${type.name}`);
  } else if (isScalarType(type)) {
    const expected = scalarProblem(type.name, value);
    if (expected) out.push(`${path}: ${JSON.stringify(value)} is not ${expected}`);
  }
  return out;
}

/** One subscription's event, caused on instance B while the subscriber listens on A. */
interface Scenario {
  /** Before subscribing: values for the field's required arguments (e.g. a pending transaction's reference). */
  arrange(): Promise<Record<string, unknown>>;
  /** Causes the event on B. */
  act(variables: Record<string, unknown>): Promise<void>;
  /** The payload after which every event the scenario causes has arrived. */
  isLast(payload: Record<string, any>): boolean;
  /** Where the payload holds its object (`key`), and the Query field (of the given result type) that reads it now by reference. */
  current: { key: string; query: string; type: string; arg?: "reference" | "id"; idField?: "reference" | "id" };
}

describe("every field of every subscription payload, for events from another instance", () => {
  let a: TestGateway;
  let b: TestGateway;
  let merchant: TestMerchant;
  let schema: GraphQLSchema;
  let onB: ReturnType<typeof apiClient>;

  withGateways(
    {
      redis: true,
      env: {
        // The documents select every field: more tokens than a client's query would need.
        GRAPHQL_MAX_TOKENS: "5000",
        // Refunds settle through a job soon after; payouts to 254700001019 only when this test delivers their result.
        SANDBOX_REFUND_DELAY_MS: "50",
        // A payment with the disputing card is disputed this soon after.
        SANDBOX_DISPUTE_DELAY_MS: "200",
        JOB_POLL_INTERVAL_MS: "100",
        PAYOUT_RESULT_OVERDUE_MS: "600000",
        RATE_LIMIT_ENABLED: "false",
      },
    },
    async (started) => {
      [a, b] = started.gateways as [TestGateway, TestGateway];
      merchant = await createSandboxMerchant(b, "Every field");
      onB = apiClient(b.url, merchant.testKey);
      const introspection = await apiClient(a.url, merchant.testKey).post("/graphql", { query: getIntrospectionQuery() });
      expect(introspection.status, introspection.text).toBe(200);
      schema = buildClientSchema((introspection.body as { data: IntrospectionQuery }).data);
    },
  );

  const initialize = async () => {
    const res = await onB.post("/api/transactions/initialize", { amount: 2500, email: "payer@example.com", metadata: { order: "A-1" } });
    expect(res.status, res.text).toBe(200);
    return res.body.reference as string;
  };
  const pay = async (reference: string) => {
    const res = await apiClient(b.url).post(`/payment/checkout/${reference}/pay`, SANDBOX_CARD);
    expect(res.status, res.text).toBe(200);
  };
  /** A payout the sandbox never answers (254700001019): it stays pending until deliverPayoutResult. */
  const pendingPayout = async () => {
    const res = await onB.post("/v1/payouts", { amount: 150000, phone_number: "254700001019", reference: "EVERY-FIELD" });
    expect(res.status, res.text).toBe(201);
    return res.body.data.reference as string;
  };
  const deliverPayoutResult = async (reference: string) => {
    const row = await b.gateway.db.prisma.payout.findUniqueOrThrow({ where: { reference }, include: { channel: true } });
    const token = Buffer.from(row.channel.callbackToken, "utf8").toString("hex");
    const res = await apiClient(b.url).post(`/callbacks/daraja/${token}/b2c/result`, {
      Result: {
        ResultType: 0, ResultCode: 0, ResultDesc: "The service request is processed successfully.",
        OriginatorConversationID: row.providerRequestId, ConversationID: "AG_1", TransactionID: "SFX7654321",
        ResultParameters: { ResultParameter: [{ Key: "TransactionAmount", Value: 1500 }, { Key: "TransactionReceipt", Value: "SFX7654321" }] },
      },
    });
    expect(res.body).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
  };

  /** A customer with a card saved at the checkout, subscribed to a new monthly plan: billed at once. */
  const subscribe = async () => {
    const customer = (await onB.post("/v1/customers", { email: `every-field-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com` })).body.data.id as number;
    const init = await onB.post("/api/transactions/initialize", { amount: 100, currency: "KES", customer, save_payment_method: true });
    expect(init.status, init.text).toBe(200);
    await pay(init.body.reference);
    const method = (await onB.get(`/v1/customers/${customer}/payment-methods`)).body.data[0].id as string;
    const plan = (await onB.post("/v1/plans", { name: "Every field", amount: 900, currency: "KES", interval: "month" })).body.data.id as string;
    const sub = await onB.post("/v1/subscriptions", { customer, plan, payment_method: method, metadata: { seat: 1 } });
    expect(sub.status, sub.text).toBe(201);
    // Done only once its first invoice is paid: its charge's events must not reach the next scenario's subscriber.
    await until(() => onB.get(`/v1/invoices?subscription=${sub.body.data.id}`), (r) => r.body?.data?.[0]?.status === "paid");
  };

  const scenarios: Record<string, Scenario> = {
    transactionEvents: {
      arrange: async () => ({}),
      act: async () => pay(await initialize()),
      isLast: (p) => p.transaction.status === "completed",
      current: { key: "transaction", query: "transaction", type: "Transaction" },
    },
    transactionStatusChanged: {
      arrange: async () => ({ reference: await initialize() }),
      act: ({ reference }) => pay(reference as string),
      isLast: () => true,
      current: { key: "transaction", query: "transaction", type: "Transaction" },
    },
    refundEvents: {
      arrange: async () => {
        const reference = await initialize();
        await pay(reference);
        return { transaction: reference };
      },
      act: async ({ transaction }) => {
        const res = await onB.post("/v1/refunds", { transaction, amount: 1000, reason: "duplicate", merchant_note: "every field" });
        expect(res.status, res.text).toBe(201);
      },
      isLast: (p) => p.refund.status !== "pending",
      current: { key: "refund", query: "refund", type: "Refund" },
    },
    payoutEvents: {
      arrange: async () => ({ payout: await pendingPayout() }),
      act: ({ payout }) => deliverPayoutResult(payout as string),
      isLast: (p) => p.payout.status !== "pending",
      current: { key: "payout", query: "payout", type: "Payout" },
    },
    disputeEvents: {
      arrange: async () => ({}),
      act: async () => {
        const reference = await initialize();
        const res = await apiClient(b.url).post(`/payment/checkout/${reference}/pay`, { ...SANDBOX_CARD, card_number: "4000000000000259" });
        expect(res.status, res.text).toBe(200);
      },
      isLast: (p) => p.type === "dispute.created",
      current: { key: "dispute", query: "dispute", type: "Dispute", arg: "id" },
    },
    subscriptionEvents: {
      arrange: async () => ({}),
      act: async () => subscribe(),
      // Created, then its first period billed.
      isLast: (p) => p.type === "subscription.updated",
      current: { key: "subscription", query: "subscription", type: "BillingSubscription", arg: "id", idField: "id" },
    },
    invoiceEvents: {
      arrange: async () => ({}),
      act: async () => subscribe(),
      isLast: (p) => p.type === "invoice.paid",
      current: { key: "invoice", query: "invoice", type: "Invoice", arg: "id", idField: "id" },
    },
    payoutStatusChanged: {
      arrange: async () => ({ reference: await pendingPayout() }),
      act: ({ reference }) => deliverPayoutResult(reference as string),
      isLast: () => true,
      current: { key: "payout", query: "payout", type: "Payout" },
    },
  };

  const rootFields = () => Object.values(schema.getSubscriptionType()!.getFields());

  it("has a scenario for every subscription field, and selects every field of each payload", () => {
    expect(rootFields().map((f) => f.name).sort()).toEqual(Object.keys(scenarios).sort());
    for (const field of rootFields()) {
      const { selection } = documentFor(field);
      // Each payload reaches its nested objects (transaction, refund, payout) and their leaves.
      expect(count(selection), field.name).toBeGreaterThan(10);
    }
    // The transaction's relations too, and its events (a cycle back to TransactionEvent: their leaves only).
    const transaction = documentFor(schema.getSubscriptionType()!.getFields().transactionEvents!).selection.get("transaction")!;
    for (const name of ["amountRefunded", "metadata", "refunded", "refunds", "channel", "customer", "attempts"]) expect(transaction.has(name), name).toBe(true);
    expect([...transaction.get("events")!.keys()].sort()).toEqual(["id", "occurredAt", "type", "webhookBody"]);
  });

  /** The variables a field's document declares, from what the scenario arranged. */
  const variablesFor = (field: GraphQLField<unknown, unknown>, arranged: Record<string, unknown>) =>
    Object.fromEntries(field.args.filter((arg) => isNonNullType(arg.type) && arg.defaultValue === undefined).map((arg) => [arg.name, arranged[arg.name]]));

  /** Fields without `ready` (the *StatusChanged ones) are known to listen once the gateway's publisher stream does. */
  const takesReady = (field: GraphQLField<unknown, unknown>) => field.args.some((arg) => arg.name === "ready");

  type Result = { data?: Record<string, any> | null; errors?: unknown };

  /** Subscribes on A over `transport`, causes the scenario's events on B, and answers every result up to the last. */
  async function run(name: string, transport: "graphql-ws" | "sse"): Promise<{ field: GraphQLField<unknown, unknown>; selection: Selection; results: Result[] }> {
    const field = schema.getSubscriptionType()!.getFields()[name]!;
    const scenario = scenarios[name]!;
    const { query, selection } = documentFor(field);
    const arranged = await scenario.arrange();
    const variables = variablesFor(field, arranged);
    const isDone = (results: Result[]) => results.some((r) => r.errors !== undefined || (r.data?.[name] && scenario.isLast(r.data[name])));
    if (transport === "graphql-ws") {
      const client = wsClient(a.url, merchant.testKey);
      try {
        const start = () => collect(client, parse(query) as never, variables as never);
        const sub = takesReady(field) ? start() : await listeningTo(a.gateway, start);
        if (takesReady(field)) await sub.ready();
        await scenario.act(arranged);
        await waitUntil(() => isDone(sub.results as Result[]) || sub.error !== undefined, () => `${name}'s last event; got ${JSON.stringify(sub.results)}`);
        expect(sub.error).toBeUndefined();
        sub.dispose();
        return { field, selection, results: sub.results as Result[] };
      } finally {
        await client.dispose();
      }
    }
    const start = () => sseSubscribe(a.url, merchant.testKey, parse(query) as never, variables);
    const stream = takesReady(field) ? await start() : await listeningTo(a.gateway, start);
    try {
      expect(stream.status).toBe(200);
      if (takesReady(field)) await stream.ready();
      await scenario.act(arranged);
      const results = () => stream.events.filter((e) => e.event === "next" && e.data?.extensions?.ready !== true).map((e) => e.data as Result);
      await stream.waitFor(() => isDone(results()) || stream.ended());
      return { field, selection, results: results() };
    } finally {
      await stream.close();
    }
  }

  /** What the Query field `current.query` answers now for the object the payload carries under `current.key`. */
  async function currentOf(name: string, selection: Selection, payload: Record<string, any>) {
    const { query, key, type, arg = "reference", idField = "reference" } = scenarios[name]!.current;
    const inner = selection.get(key)!;
    const res = await apiClient(b.url, merchant.testKey).post("/graphql", {
      query: `query Now($reference: String!) { ${query}(${arg}: $reference) { __typename ... on ${type} { ${render(inner!)} } } }`,
      variables: { reference: payload[key][idField] },
    });
    expect(res.body.errors, JSON.stringify(res.body.errors)).toBeUndefined();
    const { __typename, ...object } = res.body.data[query];
    expect(__typename).toBe(type);
    return object;
  }

  describe.each(["graphql-ws", "sse"] as const)("over %s on A, the event caused on B", (transport) => {
    it.each(Object.keys(scenarios))("%s: every selected field, present, of its type, with no error", async (name) => {
      const { field, selection, results } = await run(name, transport);
      expect(results.length, name).toBeGreaterThan(0);
      for (const result of results) {
        expect(result.errors, `${name}: ${JSON.stringify(result.errors)}`).toBeUndefined();
        expect(problemsOf(result.data?.[name], field.type, selection, name)).toEqual([]);
      }
      // The last event's object is the object as it is now (nothing changed it since): no field lost or misread on the way.
      // (A payment's e-mails are the exception: its receipt is written by its own job after the event, by design.)
      const last = results.at(-1)!.data![name];
      const { mailMessages: _sent, ...then } = last[scenarios[name]!.current.key];
      const { mailMessages: _now, ...now } = await currentOf(name, selection, last);
      expect(then).toEqual(now);
    });
  });
});
