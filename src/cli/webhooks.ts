import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import { postOutbound } from "../security/outbound.ts";
import { generateWebhookSecret, webhookHeaders } from "../modules/webhooks/signing.ts";
import { isTestProvider, testProviderName } from "../providers/registry.ts";
import { UsageError } from "./usage.ts";

/**
 * Developer commands that talk to a running gateway over its public API (never to its database), like
 * `stripe listen` and `stripe trigger`: forward a merchant's events to a local URL, and make sandbox
 * payments that emit a chosen event. Test mode only: neither has any business near live money.
 */
/** Where the gateway of this environment answers: as it computes its own PUBLIC_BASE_URL (config.ts). */
export function defaultGatewayUrl(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PUBLIC_BASE_URL) return env.PUBLIC_BASE_URL;
  return `http://localhost:${env.PORT || "3000"}`;
}

/** A local handler that hangs must not hold the listener's output (or its shutdown) for long. */
const FORWARD_TIMEOUT_MS = 10_000;
const SUCCESS_CARD = "4242424242424242";
const DECLINED_CARD = "4000000000000002";
/** Pays normally, but the sandbox fails every refund of it (refund_failed): providers/sandbox/refunds.ts. */
const REFUND_FAILS_CARD = "4000000000005126";
const DISPUTE_CARD = "4000000000000259";
/** Safaricom's sandbox test number; the sandbox connector completes its push after SANDBOX_STK_DELAY_MS. */
const SANDBOX_PHONE = "254708374149";
const TRIGGER_AMOUNT = 10_000; // KES 100.00 in minor units: whole shillings, so an STK push accepts it too
/** The sandbox's B2C simulator pays this number and refuses that one (insufficient balance): providers/sandbox/payouts.ts. */
const PAYOUT_PAID_PHONE = "254708374149";
const PAYOUT_FAILED_PHONE = "254700000001";

export function gatewayUrl(value: string | undefined): string {
  return httpUrl(value ?? defaultGatewayUrl(), "url").replace(/\/+$/, "");
}

function httpUrl(value: string, option: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`--${option} must be an http:// or https:// URL${option === "url" ? " (the default comes from PUBLIC_BASE_URL or PORT)" : ""}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`--${option} must be an http:// or https:// URL`);
  return value;
}

export function testModeKey(key: string): string {
  if (key.startsWith("sk_test_")) return key;
  throw new UsageError(
    key.startsWith("sk_live_")
      ? "--key is a live key: webhooks listen and trigger work in test mode only, use an sk_test_ key"
      : "--key must be a test-mode secret key (sk_test_...)",
  );
}

// ---------------------------------------------------------------------------------------------------------------
// webhooks listen

interface GatewayEvent {
  id: string;
  type: string;
  occurredAt: string;
  webhookBody: unknown;
}

/** Every event a webhook endpoint can receive: the transactions', the payouts', the refunds' and the disputes'. */
const EVENT_SUBSCRIPTIONS = [
  "subscription CliWebhooksListen { transactionEvents { id type occurredAt webhookBody } }",
  "subscription CliWebhooksListenPayouts { payoutEvents { id type occurredAt webhookBody } }",
  "subscription CliWebhooksListenRefunds { refundEvents { id type occurredAt webhookBody } }",
  "subscription CliWebhooksListenDisputes { disputeEvents { id type occurredAt webhookBody } }",
];

export interface ListenOptions {
  gatewayUrl: string;
  apiKey: string;
  forwardTo: string;
  /** One line of output (the Ready line, then one per event). */
  write(line: string): void;
}

/**
 * Subscribes to the merchant's events and POSTs each one to forwardTo as a webhook endpoint would get it,
 * signed with a secret made for this session. Resolves on SIGINT or SIGTERM; rejects if the gateway
 * refuses the key or drops the connection (events sent while disconnected would be silently missed).
 */
export async function listenForWebhooks(options: ListenOptions): Promise<void> {
  const forwardTo = httpUrl(options.forwardTo, "forward-to");
  const secret = generateWebhookSecret();
  const stopped = untilStopSignal();
  let fail!: (error: Error) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => {}); // raced below; without this an unawaited rejection would crash the process first
  const forwarding = new Set<Promise<void>>();

  const forward = async (event: GatewayEvent) => {
    // The same bytes the gateway would send: webhookBody is its body parsed, and JSON keeps key order.
    const body = JSON.stringify(event.webhookBody);
    const headers = webhookHeaders({ id: event.id, timestamp: Math.floor(Date.now() / 1000), body, secrets: [secret] });
    // The developer's own machine is the point here, so private addresses are allowed.
    const result = await postOutbound(forwardTo, { headers, body, timeoutMs: FORWARD_TIMEOUT_MS, allowPrivate: true });
    options.write(`${event.occurredAt} ${event.type} ${event.id} -> ${result.statusCode ?? `error (${result.error})`}`);
  };

  const client = createClient({
    url: `${options.gatewayUrl.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { "X-API-Key": options.apiKey },
    retryAttempts: 0,
    lazy: true,
  });
  const unsubscribes = EVENT_SUBSCRIPTIONS.map((query) =>
    client.subscribe<Record<string, GatewayEvent>>(
      { query },
      {
        next: (result) => {
          const event = result.data ? Object.values(result.data)[0] : undefined;
          if (!event) return fail(new Error(`the gateway sent an error: ${JSON.stringify(result.errors ?? result)}`));
          // Live-only news that real webhook endpoints never receive.
          if (event.type === "transaction.created") return;
          const sent = forward(event).finally(() => forwarding.delete(sent));
          forwarding.add(sent);
        },
        error: (error) => fail(connectionError(error, options.gatewayUrl)),
        complete: () => fail(new Error("the gateway ended the subscription (is it shutting down?)")),
      },
    ),
  );

  try {
    // graphql-ws acknowledges connections, not subscriptions. The server handles one socket's operations
    // in the order sent, through the same steps, so once a query sent after the subscribe has been
    // answered the subscription is (in practice) listening: only then is "Ready" true.
    const ready = await Promise.race([queryOnce(client, "query CliWebhooksReady { __typename }").then(() => true), failed, stopped.then(() => false)]);
    if (ready) {
      options.write(`Ready! Your webhook signing secret is ${secret} (forwarding to ${options.forwardTo})`);
      await Promise.race([stopped, failed]);
    }
  } finally {
    stopped.cancel();
    for (const unsubscribe of unsubscribes) unsubscribe();
    await client.dispose();
    await Promise.allSettled(forwarding);
  }
}

function queryOnce(client: Client, query: string): Promise<void> {
  return new Promise((resolve, reject) => {
    client.subscribe(
      { query },
      {
        next: (result) => (result.errors ? reject(new Error(result.errors.map((e) => e.message).join("; "))) : undefined),
        error: reject,
        complete: resolve,
      },
    );
  });
}

function connectionError(error: unknown, url: string): Error {
  if (error instanceof Error) return new Error(`cannot reach the gateway at ${url}: ${error.message}`);
  if (Array.isArray(error)) return new Error(`the gateway refused the subscription: ${error.map((e: { message?: string }) => e.message).join("; ")}`);
  const { code, reason } = error as { code?: number; reason?: string };
  if (code === 4403) return new Error("the gateway refused the API key (4403 Forbidden)");
  // ws reports a failed connect as an ErrorEvent-like object with a message, not as a close.
  const message = (error as { message?: string }).message;
  if (code === undefined) return new Error(`cannot reach the gateway at ${url}${message ? `: ${message}` : ""}`);
  return new Error(`the gateway closed the connection (${code}${reason ? ` ${reason}` : ""})`);
}

/** Resolves on the first SIGINT or SIGTERM; cancel() removes the handlers so the process can end. */
function untilStopSignal(): Promise<void> & { cancel(): void } {
  let onSignal = () => {};
  const promise = new Promise<void>((resolve) => {
    onSignal = () => resolve();
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  });
  const cancel = () => {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  };
  return Object.assign(promise, { cancel });
}

// ---------------------------------------------------------------------------------------------------------------
// trigger

type GatewayCall = (method: "GET" | "POST", path: string, body?: unknown, expectStatus?: number) => Promise<any>;

/** How long a trigger waits for its event before it exits non-zero (--timeout overrides it, in seconds). */
export const DEFAULT_TRIGGER_TIMEOUT_MS = 30_000;

/** The webhook body's data names what an event is about: the object itself, or (a dispute) the payment disputed. */
type Trigger = { make: (call: GatewayCall, channelId: number) => Promise<string>; field: "reference" | "transaction_reference" };

/** How to make a sandbox payment emit each event; make resolves with the reference of what it made (transaction, payout or refund). */
const triggers: Record<string, Trigger> = {
  "transaction.completed": { make: (call, channelId) => payByCard(call, channelId, SUCCESS_CARD), field: "reference" },
  // Declined until the checkout's attempts (CHECKOUT_MAX_ATTEMPTS) are spent: only then is the payment failed.
  "transaction.failed": { make: (call, channelId) => declineUntilFailed(call, channelId), field: "reference" },
  // The sandbox completes the push a moment later, so transaction.completed follows.
  "transaction.pending": {
    make: async (call, channelId) =>
      (await call("POST", "/api/momo/stk-push", { amount: TRIGGER_AMOUNT, phone_number: SANDBOX_PHONE, payment_channel_id: channelId })).transaction.reference as string,
    field: "reference",
  },
  // The sandbox answers a payout after SANDBOX_STK_DELAY_MS, so the event follows a moment after this returns.
  "payout.completed": { make: (call, channelId) => payOut(call, channelId, PAYOUT_PAID_PHONE), field: "reference" },
  "payout.failed": { make: (call, channelId) => payOut(call, channelId, PAYOUT_FAILED_PHONE), field: "reference" },
  // A card payment refunded in full; the sandbox settles the refund SANDBOX_REFUND_DELAY_MS later (transaction.completed comes first).
  "refund.completed": { make: async (call, channelId) => refund(call, await payByCard(call, channelId, SUCCESS_CARD)), field: "reference" },
  "refund.failed": { make: async (call, channelId) => refund(call, await payByCard(call, channelId, REFUND_FAILS_CARD)), field: "reference" },
  // A payment with the disputing test card: the sandbox opens its dispute SANDBOX_DISPUTE_DELAY_MS later.
  "dispute.created": { make: (call, channelId) => payByCard(call, channelId, DISPUTE_CARD), field: "transaction_reference" },
};

export const triggerableEvents = Object.keys(triggers);

export function unsupportedTrigger(type: string | undefined): UsageError {
  return new UsageError(`${type ? `Cannot trigger "${type}"` : "trigger needs an event type"}; supported events: ${triggerableEvents.join(", ")}`);
}

/** --timeout in seconds (a positive number), or the default. */
export function triggerTimeoutMs(value: string | undefined): number {
  if (value === undefined) return DEFAULT_TRIGGER_TIMEOUT_MS;
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0 || value.trim() === "") throw new UsageError("--timeout must be a number of seconds greater than 0");
  return Math.round(seconds * 1000);
}

async function initialize(call: GatewayCall, channelId: number): Promise<string> {
  const { reference } = await call("POST", "/api/transactions/initialize", {
    amount: TRIGGER_AMOUNT,
    email: "cli-trigger@example.com",
    payment_channel_id: channelId,
    description: "cli trigger",
  });
  return reference as string;
}

function payCard(call: GatewayCall, reference: string, cardNumber: string, expectStatus: number): Promise<unknown> {
  const card = { card_number: cardNumber, expiry_month: 12, expiry_year: new Date().getUTCFullYear() + 3, cvc: "123" };
  return call("POST", `/payment/checkout/${reference}/pay`, card, expectStatus);
}

async function payByCard(call: GatewayCall, channelId: number, cardNumber: string): Promise<string> {
  const reference = await initialize(call, channelId);
  await payCard(call, reference, cardNumber, 200);
  return reference;
}

/** The checkout takes at most 10 attempts (CHECKOUT_MAX_ATTEMPTS' ceiling); each decline is followed by a look at the status. */
const MAX_CHECKOUT_ATTEMPTS = 10;

async function declineUntilFailed(call: GatewayCall, channelId: number): Promise<string> {
  const reference = await initialize(call, channelId);
  for (let attempt = 1; attempt <= MAX_CHECKOUT_ATTEMPTS; attempt++) {
    await payCard(call, reference, DECLINED_CARD, 402);
    // verify's body carries `status` twice; the transaction's is the one a JSON parser keeps.
    const { status } = await call("GET", `/api/transactions/verify/${encodeURIComponent(reference)}`);
    if (status === "failed") return reference;
    if (status !== "pending") throw new Error(`transaction ${reference} is ${status} after a declined card, not failed`);
  }
  throw new Error(`transaction ${reference} is still pending after ${MAX_CHECKOUT_ATTEMPTS} declined cards`);
}

async function payOut(call: GatewayCall, channelId: number, phone: string): Promise<string> {
  const body = { amount: TRIGGER_AMOUNT, phone_number: phone, payment_channel_id: channelId, description: "cli trigger" };
  return (await call("POST", "/v1/payouts", body, 201)).data.reference as string;
}

/** Refunds all of a payment; resolves with the refund's reference (re_...). */
async function refund(call: GatewayCall, transaction: string): Promise<string> {
  return (await call("POST", "/v1/refunds", { transaction, reason: "requested_by_customer", merchant_note: "cli trigger" }, 201)).data.reference as string;
}

/**
 * Named explicitly so a trigger never reaches a real provider, whatever the merchant's default channel is.
 * None is created here: a new channel would become the merchant's default.
 */
async function testChannelId(call: GatewayCall): Promise<number> {
  const { channels } = (await call("GET", "/api/payment-channels/list?active_only=true")) as { channels: { id: number; provider: string; is_default: boolean }[] };
  const usable = channels.filter((c) => isTestProvider(c.provider)).sort((a, b) => Number(b.is_default) - Number(a.is_default));
  if (!usable[0]) {
    const example = JSON.stringify({ name: testProviderName.charAt(0).toUpperCase() + testProviderName.slice(1), provider: testProviderName, config: {} });
    throw new Error(
      `trigger pays through a ${testProviderName} payment channel and this merchant has no active one in test mode; create one with POST /api/payment-channels/create ${example}`,
    );
  }
  return usable[0].id;
}

/**
 * Listens to the merchant's events (every stream, each confirmed listening with `ready: true`) before anything is
 * made, so the event cannot slip by; resolves when `matches` accepts one. The caller disposes the client.
 */
async function listenFor(client: Client, gatewayUrl: string): Promise<{ ready: Promise<void>; seen: (matches: (event: GatewayEvent) => boolean) => Promise<GatewayEvent> }> {
  const events: GatewayEvent[] = [];
  const waiters = new Set<{ matches: (event: GatewayEvent) => boolean; resolve: (event: GatewayEvent) => void }>();
  let fail!: (error: Error) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => {});
  const readies = EVENT_SUBSCRIPTIONS.map(
    (query) =>
      new Promise<void>((resolve) => {
        client.subscribe<Record<string, GatewayEvent>>(
          { query: query.replace(/ \{ id type/, "(ready: true) { id type") },
          {
            next: (result) => {
              if ((result.extensions as { ready?: boolean } | undefined)?.ready === true && !result.data) return resolve();
              const event = result.data ? Object.values(result.data)[0] : undefined;
              if (!event) return fail(new Error(`the gateway sent an error: ${JSON.stringify(result.errors ?? result)}`));
              events.push(event);
              for (const waiter of waiters) if (waiter.matches(event)) waiter.resolve(event);
            },
            error: (error) => fail(connectionError(error, gatewayUrl)),
            complete: () => fail(new Error("the gateway ended the subscription (is it shutting down?)")),
          },
        );
      }),
  );
  return {
    ready: Promise.race([Promise.all(readies).then(() => undefined), failed]),
    seen: (matches) => {
      const found = events.find(matches);
      if (found) return Promise.resolve(found);
      return Promise.race([new Promise<GatewayEvent>((resolve) => waiters.add({ matches, resolve })), failed]);
    },
  };
}

/**
 * Makes the event happen and waits until it did: resolves once the gateway published it (exit 0), rejects when it
 * did not within timeoutMs (exit 1), so a script that triggers and then checks its receiver knows which side failed.
 */
export async function triggerEvent(options: { gatewayUrl: string; apiKey: string; type: string; timeoutMs?: number }): Promise<{ event: string; reference: string }> {
  const trigger = triggers[options.type];
  if (!trigger) throw unsupportedTrigger(options.type);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TRIGGER_TIMEOUT_MS;
  const call: GatewayCall = async (method, path, body, expectStatus = 200) => {
    let response: Response;
    try {
      response = await fetch(`${options.gatewayUrl}${path}`, {
        method,
        headers: { "x-api-key": options.apiKey, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new Error(`cannot reach the gateway at ${options.gatewayUrl}: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
    }
    const text = await response.text();
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (response.status !== expectStatus) {
      throw new Error(`${method} ${path.split("?")[0]}: HTTP ${response.status}: ${parsed?.message ?? text.slice(0, 200)}`);
    }
    return parsed;
  };
  // The channel first: a gateway that is not there, or a merchant without a sandbox channel, is told at once.
  const channelId = await testChannelId(call);
  const client = createClient({
    url: `${options.gatewayUrl.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { "X-API-Key": options.apiKey },
    retryAttempts: 0,
    lazy: true,
  });
  let timer: NodeJS.Timeout | undefined;
  let reference: string | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${options.type} did not happen within ${timeoutMs / 1000} s${reference ? ` (made ${reference})` : ""}`)), timeoutMs);
  });
  try {
    const happened = (async () => {
      const listening = await listenFor(client, options.gatewayUrl);
      await listening.ready;
      reference = await trigger.make(call, channelId);
      const about = reference;
      await listening.seen((event) => event.type === options.type && (event.webhookBody as { data?: Record<string, unknown> } | null)?.data?.[trigger.field] === about);
      return about;
    })();
    happened.catch(() => {}); // raced below; a late failure after the timeout must not crash the process
    return { event: options.type, reference: await Promise.race([happened, timedOut]) };
  } finally {
    clearTimeout(timer);
    await client.dispose();
  }
}
