import { createHmac, randomBytes, randomInt } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * A loopback Paystack: transaction initialize and verify, charge_authorization (saved cards), its hosted payment page, transfer recipients,
 * transfers and transfer verify, refunds (create, fetch, list by transaction), disputes (fetch, list, upload URL and the
 * signed upload itself, evidence, resolve), speaking the documented envelope ({status, message, data}) and checking
 * what Paystack checks (the secret key, reference characters, duplicate references, currencies, the
 * transfer source). Webhooks are posted with a real `x-paystack-signature`: hex HMAC-SHA512 of the raw
 * body keyed with the secret key. Switches reproduce Paystack's failures.
 */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: any;
}

export interface FakeTransaction {
  id: number;
  reference: string;
  amount: number;
  currency: string;
  email: string;
  callback_url: string | null;
  metadata: unknown;
  access_code: string;
  /** What verify reports: "abandoned" until the payer pays (Paystack's own wording for an unpaid transaction); "reversed" after a lost dispute. */
  status: "abandoned" | "success" | "failed" | "reversed";
  paid_at: string | null;
  gateway_response: string;
  created_at: string;
  /** The card it was paid with, as verify's `authorization` shows it: made once, when first paid. */
  authorization?: FakeAuthorization;
}

/** A paid card's authorization (providers.md, Recurring): exp_month/exp_year strings, card_type with a trailing space. */
export interface FakeAuthorization {
  authorization_code: string; bin: string; last4: string; exp_month: string; exp_year: string; channel: "card"; card_type: string;
  bank: string; country_code: string; brand: string; reusable: boolean; signature: string; account_name: string | null;
}

export interface FakeRecipient {
  recipient_code: string;
  type: string;
  name: string;
  currency: string;
  details: { account_number: string; account_name: string | null; bank_code: string; bank_name: string };
}

export interface FakeTransfer {
  id: number;
  reference: string;
  amount: number;
  currency: string;
  recipient_code: string;
  reason: string | null;
  transfer_code: string;
  status: "pending" | "success" | "failed" | "reversed";
  createdAt: string;
  updatedAt: string;
}

export type FakeRefundStatus = "pending" | "processing" | "processed" | "failed" | "needs-attention";

export interface FakeRefund {
  id: number;
  transaction: FakeTransaction;
  amount: number;
  currency: string;
  status: FakeRefundStatus;
  merchant_note: string;
  customer_note: string;
  createdAt: string;
  refunded_at: string | null;
}

export type FakeDisputeResolution = "declined" | "merchant-accepted" | "auto-accepted";

/** A chargeback as Paystack keeps it (providers.md, Disputes). */
export interface FakeDispute {
  id: number;
  transaction: FakeTransaction;
  /** What the payer claims back, in subunits; Paystack leaves it null on some disputes. */
  refund_amount: number | null;
  currency: string;
  status: "awaiting-merchant-feedback" | "awaiting-bank-feedback" | "pending" | "resolved" | "archived";
  resolution: FakeDisputeResolution | null;
  category: string;
  dueAt: string | null;
  resolvedAt: string | null;
  createdAt: string;
  updatedAt: string;
  history: { status: string; by: string; at: string }[];
  messages: { sender: string; body: string; at: string }[];
  /** The latest evidence POSTed for it, as Paystack answered it (with its id). */
  evidence: Record<string, unknown> | null;
  /** Every PUT /dispute/:id/resolve body accepted, in order. */
  resolves: Record<string, unknown>[];
}

/** A file PUT to a signed upload URL the fake handed out. */
export interface FakeUpload {
  disputeId: number;
  /** The name the merchant asked for (upload_filename). */
  requestedName: string;
  /** The signature of its URL; the PUT must carry it. */
  signature: string;
  bytes: Buffer | null;
  contentType: string | null;
}

export interface FakePaystackSwitches {
  /** The next matching call(s) answer this without doing anything. */
  failNext: { path: string; status: number; body: unknown; count?: number } | null;
  /** Delay before answering calls whose path starts with the key. */
  delayMs: Record<string, number>;
  /** Post charge.success to webhookUrl when a payment succeeds. */
  chargeWebhooks: boolean;
  transferOutcome: "success" | "failed" | "reversed";
  transferSettleDelayMs: number;
  /** Settle transfers but post no webhook (the gateway must ask /transfer/verify). */
  transferNoWebhook: boolean;
  insufficientBalance: boolean;
  /** Fields merged into verify's data for a reference (a mismatched amount or currency). */
  verifyOverride: Record<string, Record<string, unknown>>;
  /** Where a refund ends, refundSettleDelayMs after it was queued (pending -> processing -> this). */
  refundOutcome: "processed" | "failed" | "needs-attention";
  refundSettleDelayMs: number;
  /** Post refund.* webhooks (refund.pending when queued, then the outcome's). */
  refundWebhooks: boolean;
  /**
   * How POST /refund answers once the refund is queued: normally; a 502 (the answer lost on the way back);
   * or never (the caller times out). Either way the refund exists and settles.
   */
  refundReply: "normal" | "error_after_create" | "hang_after_create";
  /** The most GET /transaction and GET /settlement serve per page, whatever perPage asks (to make a test's day span pages). */
  listMaxPerPage: number;
  /** Whether the next paid cards' authorizations may be charged again (Paystack's `reusable`). */
  authorizationReusable: boolean;
  /**
   * How POST /transaction/charge_authorization ends: paid, declined, or paused for the payer's bank (2FA: an
   * authorization_url); and how it answers once the charge is made: normally, a 502 (the answer lost on the way back),
   * or 400 Duplicate Transaction Reference (what a second request under the reference gets while the first, already
   * taken, is still in flight: the charge under it stands).
   */
  chargeOutcome: "success" | "failed" | "paused";
  chargeReply: "normal" | "error_after_create" | "duplicate_after_create";
}

/** A settlement as GET /settlement lists it (PaystackOSS/openapi Settlement). */
export interface FakeSettlement {
  id: number;
  status: "success" | "processing" | "pending" | "failed";
  currency: string;
  total_amount: number;
  effective_amount: number;
  total_fees: number;
  total_processed: number;
  settlement_date: string;
  createdAt: string;
}

const CURRENCIES = ["NGN", "GHS", "ZAR", "KES", "USD"];

export function paystackSignature(rawBody: string | Buffer, secretKey: string): string {
  return createHmac("sha512", secretKey).update(rawBody).digest("hex");
}

const code = (prefix: string) => `${prefix}${randomBytes(8).toString("hex").slice(0, 15)}`;

export async function startFakePaystack(options: { secretKey?: string; publicKey?: string } = {}) {
  const secretKey = options.secretKey ?? `sk_test_${randomBytes(20).toString("hex")}`;
  const publicKey = options.publicKey ?? `pk_test_${randomBytes(20).toString("hex")}`;
  const requests: RecordedRequest[] = [];
  const transactions = new Map<string, FakeTransaction>();
  const recipients = new Map<string, FakeRecipient>();
  const transfers = new Map<string, FakeTransfer>();
  const refunds = new Map<number, FakeRefund>();
  const disputes = new Map<number, FakeDispute>();
  /** Signed uploads by the fileName Paystack gave (upload_url), with the bytes once PUT. */
  const uploads = new Map<string, FakeUpload>();
  const webhooksSent: { url: string; body: unknown; status: number | null; error?: string }[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const sockets = new Set<Socket>();
  const switches: FakePaystackSwitches = {
    failNext: null,
    delayMs: {},
    chargeWebhooks: true,
    transferOutcome: "success",
    transferSettleDelayMs: 20,
    transferNoWebhook: false,
    insufficientBalance: false,
    verifyOverride: {},
    refundOutcome: "processed",
    refundSettleDelayMs: 20,
    refundWebhooks: true,
    refundReply: "normal",
    listMaxPerPage: 100,
    authorizationReusable: true,
    chargeOutcome: "success",
    chargeReply: "normal",
  };
  /** The one card every payer of this fake pays with: its signature is the same across authorizations. */
  const cardSignature = code("SIG_");
  /** Every authorization handed out, by its code: what charge_authorization charges. */
  const authorizations = new Map<string, FakeAuthorization>();
  const authorizationOf = (t: FakeTransaction) => {
    t.authorization ??= {
      authorization_code: code("AUTH_"), bin: "408408", last4: "4081", exp_month: "12", exp_year: "2030", channel: "card", card_type: "visa ",
      bank: "TEST BANK", country_code: "NG", brand: "visa", reusable: switches.authorizationReusable, signature: cardSignature, account_name: null,
    };
    authorizations.set(t.authorization.authorization_code, t.authorization);
    return t.authorization;
  };
  const settlements: FakeSettlement[] = [];
  let nextId = 4_000_000 + randomInt(1000);
  let url = "";

  const fake = {
    url,
    secretKey,
    publicKey,
    requests,
    transactions,
    authorizations,
    recipients,
    transfers,
    refunds,
    disputes,
    uploads,
    settlements,
    switches,
    webhooksSent,
    webhookUrl: undefined as string | undefined,
    channelConfig: () => ({ public_key: publicKey, secret_key: secretKey }),

    verifyData(reference: string) {
      const t = transactions.get(reference)!;
      const paid = t.status === "success";
      return {
        id: t.id,
        domain: "test",
        status: t.status,
        reference: t.reference,
        amount: t.amount,
        requested_amount: t.amount,
        currency: t.currency,
        gateway_response: t.gateway_response,
        paid_at: t.paid_at,
        created_at: t.created_at,
        channel: "card",
        metadata: t.metadata,
        fees: paid ? Math.round(t.amount * 0.015) : null,
        authorization: paid || t.authorization ? authorizationOf(t) : {},
        customer: { id: 181873746, email: t.email, customer_code: "CUS_fake" },
        ...(switches.verifyOverride[reference] ?? {}),
      };
    },

    chargeEvent(reference: string, event = "charge.success") {
      return { event, data: fake.verifyData(reference) };
    },

    transferData(reference: string) {
      const t = transfers.get(reference)!;
      const r = recipients.get(t.recipient_code)!;
      return {
        amount: t.amount,
        currency: t.currency,
        domain: "test",
        id: t.id,
        reason: t.reason,
        reference: t.reference,
        source: "balance",
        status: t.status,
        transfer_code: t.transfer_code,
        createdAt: t.createdAt,
        updatedAt: t.updatedAt,
        recipient: { recipient_code: r.recipient_code, type: r.type, name: r.name, currency: r.currency, details: r.details },
      };
    },

    transferEvent(reference: string, event: "transfer.success" | "transfer.failed" | "transfer.reversed") {
      return { event, data: fake.transferData(reference) };
    },

    /** A refund as GET /refund/:id and GET /refund list it (PaystackOSS/openapi RefundFetchResponse). */
    refundData(r: FakeRefund) {
      return {
        integration: 100032, transaction: r.transaction.id, dispute: null, settlement: null, id: r.id, domain: "test", currency: r.currency, amount: r.amount,
        status: r.status, refunded_at: r.refunded_at, refunded_by: "owner@example.com", customer_note: r.customer_note, merchant_note: r.merchant_note,
        deducted_amount: r.amount, fully_deducted: 1, createdAt: r.createdAt, bank_reference: null, transaction_reference: r.transaction.reference,
        reason: r.status === "failed" ? "Card issuer declined the refund" : "", customer: { id: 181873746, first_name: "", last_name: "", email: r.transaction.email, customer_code: "CUS_fake", phone: "", metadata: "", risk_action: "default", international_format_phone: "" },
        refund_type: r.amount === r.transaction.amount ? "full" : "partial", transaction_amount: r.transaction.amount, initiated_by: "api", refund_channel: "card", session_id: null, collect_account_number: false,
      };
    },

    /** A refund.* webhook as Paystack's documented samples have it: no refund id except on needs-attention. */
    refundEvent(r: FakeRefund, event = `refund.${r.status}`) {
      return {
        event,
        data: {
          status: r.status, transaction_reference: r.transaction.reference, refund_reference: r.status === "processed" ? String(132013318360 + r.id) : null,
          amount: String(r.amount), currency: r.currency, processor: "mpgs_zen", customer: { first_name: "", last_name: "", email: r.transaction.email },
          integration: 100032, domain: "test",
          ...(r.status === "needs-attention" ? { id: String(r.id), customer_note: r.customer_note, merchant_note: r.merchant_note } : {}),
        },
      };
    },

    /** A refund made outside the gateway (Paystack's dashboard): it uses up what Paystack will still refund. */
    refundOutside(reference: string, amount: number) {
      const t = transactions.get(reference)!;
      const r: FakeRefund = { id: nextId++, transaction: t, amount, currency: t.currency, status: "processed", merchant_note: "Refunded from the dashboard", customer_note: "", createdAt: new Date().toISOString(), refunded_at: new Date().toISOString() };
      refunds.set(r.id, r);
      return r;
    },

    /**
     * A dispute as Paystack shows it: REST (`GET /dispute/:id`: createdAt/updatedAt, attachments a string) or a
     * charge.dispute.* webhook (created_at/updated_at, attachments null); dueAt and resolvedAt camelCase in both.
     */
    disputeData(d: FakeDispute, shape: "rest" | "webhook" = "rest") {
      const at = shape === "rest" ? "createdAt" : "created_at";
      return {
        id: d.id, refund_amount: d.refund_amount, currency: d.currency, status: d.status, resolution: d.resolution, domain: "test",
        transaction: { ...fake.verifyData(d.transaction.reference), authorization: {} }, transaction_reference: null, merchant_transaction_reference: null,
        category: d.category, customer: { id: 181873746, first_name: null, last_name: null, email: d.transaction.email, customer_code: "CUS_fake", phone: null, risk_action: "default" },
        bin: "408408", last4: "4081", dueAt: d.dueAt, resolvedAt: d.resolvedAt, evidence: d.evidence, attachments: shape === "rest" ? "[]" : null, note: null,
        history: d.history.map((h) => ({ status: h.status, by: h.by, [at]: h.at })),
        messages: d.messages.map((m) => ({ sender: m.sender, body: m.body, [at]: m.at })),
        ...(shape === "rest" ? { createdAt: d.createdAt, updatedAt: d.updatedAt } : { created_at: d.createdAt, updated_at: d.updatedAt }),
      };
    },

    /** The payer's bank opens a chargeback on a paid transaction: the merchant has until dueAt (48 hours unless said). */
    openDispute(reference: string, opts: { amount?: number | null; category?: string; dueAt?: string | null; message?: string } = {}) {
      const t = transactions.get(reference);
      if (!t || t.status !== "success") throw new Error(`no paid transaction ${reference} to dispute`);
      const now = new Date().toISOString();
      const d: FakeDispute = {
        id: nextId++, transaction: t, refund_amount: opts.amount === undefined ? t.amount : opts.amount, currency: t.currency, status: "awaiting-merchant-feedback", resolution: null,
        category: opts.category ?? "chargeback", dueAt: opts.dueAt === undefined ? new Date(Date.now() + 48 * 3_600_000).toISOString() : opts.dueAt, resolvedAt: null, createdAt: now, updatedAt: now,
        history: [{ status: "pending", by: "disputes@paystack.test", at: now }],
        messages: [{ sender: "disputes@paystack.test", body: opts.message ?? "Customer complained about debit without value", at: now }],
        evidence: null, resolves: [],
      };
      disputes.set(d.id, d);
      return d;
    },

    /** The bank's verdict: declined means the merchant won; an acceptance means lost, and the payment is reversed to the payer. */
    resolveDispute(id: number, verdict: FakeDisputeResolution) {
      const d = disputes.get(id);
      if (!d) throw new Error(`no dispute ${id}`);
      const now = new Date().toISOString();
      Object.assign(d, { status: "resolved", resolution: verdict, resolvedAt: now, updatedAt: now });
      d.history.push({ status: "resolved", by: "disputes@paystack.test", at: now });
      if (verdict !== "declined") d.transaction.status = "reversed";
      return d;
    },

    /** POSTs charge.dispute.create, .remind or .resolve for the dispute as it stands, signed like every webhook. */
    async sendDisputeWebhook(id: number, event: "charge.dispute.create" | "charge.dispute.remind" | "charge.dispute.resolve", target: string) {
      const d = disputes.get(id);
      if (!d) throw new Error(`no dispute ${id}`);
      return fake.sendWebhook(target, { event, data: fake.disputeData(d, "webhook") });
    },

    /** POSTs a webhook as Paystack does; rawBody/signedBody reproduce a tampered body, signature a forged header. */
    async sendWebhook(target: string, body: unknown, opts: { signWith?: string; rawBody?: string; signedBody?: string; signature?: string } = {}) {
      const raw = opts.rawBody ?? JSON.stringify(body);
      const signature = opts.signature ?? paystackSignature(opts.signedBody ?? raw, opts.signWith ?? secretKey);
      try {
        const response = await fetch(target, { method: "POST", headers: { "content-type": "application/json", "x-paystack-signature": signature }, body: raw });
        const text = await response.text();
        webhooksSent.push({ url: target, body, status: response.status });
        return { status: response.status, text };
      } catch (error) {
        webhooksSent.push({ url: target, body, status: null, error: (error as Error).message });
        return { status: 0, text: (error as Error).message };
      }
    },

    /** The payer pays (or is declined) on the hosted page; charge.success goes to webhookUrl when configured. */
    async pay(reference: string, outcome: "success" | "failed" = "success") {
      const t = transactions.get(reference);
      if (!t) throw new Error(`no transaction ${reference}`);
      t.status = outcome;
      t.gateway_response = outcome === "success" ? "Successful" : "Declined";
      t.paid_at = outcome === "success" ? new Date().toISOString() : null;
      if (outcome === "success" && switches.chargeWebhooks && fake.webhookUrl) await fake.sendWebhook(fake.webhookUrl, fake.chargeEvent(reference));
    },

    /** A transaction Paystack has that the gateway never opened (made on Paystack's own page or API), e.g. paid. */
    inject(t: Partial<FakeTransaction> & { reference: string; amount: number }) {
      const now = new Date().toISOString();
      const created: FakeTransaction = {
        id: nextId++, currency: "NGN", email: "payer@example.com", callback_url: null, metadata: null, access_code: randomBytes(8).toString("hex"),
        status: "success", paid_at: now, gateway_response: "Successful", created_at: now, ...t,
      };
      transactions.set(created.reference, created);
      return created;
    },

    /** A settlement paid to the merchant's bank (fees taken), dated now unless said. */
    addSettlement(s: Partial<FakeSettlement> & { total_amount: number; total_fees: number }) {
      const now = new Date().toISOString();
      const settlement: FakeSettlement = { id: nextId++, status: "success", currency: "NGN", effective_amount: s.total_amount - s.total_fees, total_processed: s.total_amount, settlement_date: now, createdAt: now, ...s };
      settlements.push(settlement);
      return settlement;
    },

    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };
  const refuse = (res: ServerResponse, status: number, message: string, extra: Record<string, unknown> = {}) => send(res, status, { status: false, message, ...extra });

  function settleTransferLater(transfer: FakeTransfer) {
    const timer = setTimeout(() => {
      timers.delete(timer);
      transfer.status = switches.transferOutcome;
      transfer.updatedAt = new Date().toISOString();
      if (!switches.transferNoWebhook && fake.webhookUrl) void fake.sendWebhook(fake.webhookUrl, fake.transferEvent(transfer.reference, `transfer.${transfer.status}` as "transfer.success"));
    }, switches.transferSettleDelayMs);
    timers.add(timer);
  }

  /** Settles as the switches were when the refund was queued (a test may put them back meanwhile). */
  function settleRefundLater(refund: FakeRefund) {
    const { refundOutcome, refundWebhooks } = switches;
    if (refundWebhooks && fake.webhookUrl) void fake.sendWebhook(fake.webhookUrl, fake.refundEvent(refund));
    const timer = setTimeout(() => {
      timers.delete(timer);
      refund.status = refundOutcome;
      if (refund.status === "processed") refund.refunded_at = new Date().toISOString();
      if (refundWebhooks && fake.webhookUrl) void fake.sendWebhook(fake.webhookUrl, fake.refundEvent(refund));
    }, switches.refundSettleDelayMs);
    timers.add(timer);
  }

  /** The failNext switch, used up by a call whose path it matches. */
  function takeFailure(path: string) {
    const failure = switches.failNext;
    if (!(failure && path.startsWith(failure.path))) return null;
    failure.count = (failure.count ?? 1) - 1;
    if (failure.count <= 0) switches.failNext = null;
    return failure;
  }

  async function handle(req: IncomingMessage, res: ServerResponse, raw: string, bytes: Buffer) {
    const path = req.url ?? "/";
    let body: any = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      body = null;
    }
    requests.push({ method: req.method ?? "GET", path, headers: req.headers, body });
    const delay = Object.entries(switches.delayMs).find(([prefix]) => path.startsWith(prefix))?.[1];
    if (delay) await new Promise<void>((resolve) => { const t = setTimeout(() => { timers.delete(t); resolve(); }, delay); timers.add(t); });
    if (res.destroyed) return;

    // The hosted page (no API key: it is the payer's browser).
    const page = /^\/checkout\/([A-Za-z0-9]+)(\/pay)?(?:\?.*)?$/.exec(path);
    if (page) {
      const t = [...transactions.values()].find((x) => x.access_code === page[1]);
      if (!t) return void res.writeHead(404, { "content-type": "text/html" }).end("<h1>Not found</h1>");
      if (!page[2]) {
        return void res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(`<!doctype html><html><head><meta charset="utf-8"><title>Paystack Checkout</title></head><body>
<h1>Pay ${t.currency} ${(t.amount / 100).toFixed(2)}</h1><p>${t.email}</p>
<form method="post" action="/checkout/${t.access_code}/pay"><button id="pay" name="outcome" value="success">Pay</button><button id="decline" name="outcome" value="failed">Decline</button></form></body></html>`);
      }
      const outcome = new URLSearchParams(raw).get("outcome") === "failed" ? "failed" : "success";
      await fake.pay(t.reference, outcome);
      const back = t.callback_url ?? "about:blank";
      const location = `${back}${back.includes("?") ? "&" : "?"}trxref=${encodeURIComponent(t.reference)}&reference=${encodeURIComponent(t.reference)}`;
      return void res.writeHead(302, { location }).end();
    }

    // A signed upload URL (Paystack's file storage): authorized by its signature, never by the secret key.
    const upload = /^\/uploads\/([^/?]+)\?X-Amz-Signature=([0-9a-f]+)$/.exec(path);
    if (req.method === "PUT" && upload) {
      const failure = takeFailure(path);
      if (failure) return send(res, failure.status, failure.body);
      const pending = uploads.get(decodeURIComponent(upload[1]!));
      const xml = (status: number, error: string) => void res.writeHead(status, { "content-type": "application/xml" }).end(`<Error><Code>${error}</Code></Error>`);
      // Storage refuses a second way of authorizing next to the URL's signature (and the key must not travel there).
      if (req.headers.authorization) return xml(400, "InvalidArgument");
      if (!pending || pending.signature !== upload[2]) return xml(403, "SignatureDoesNotMatch");
      pending.bytes = bytes;
      pending.contentType = req.headers["content-type"] ?? null;
      return void res.writeHead(200).end();
    }

    if (req.headers.authorization !== `Bearer ${secretKey}`) return refuse(res, 401, "Invalid key");
    const failure = takeFailure(path);
    if (failure) return send(res, failure.status, failure.body);

    if (req.method === "POST" && path === "/transaction/initialize") {
      const amount = typeof body?.amount === "string" && /^\d+$/.test(body.amount) ? Number(body.amount) : body?.amount;
      if (typeof body?.email !== "string" || !/^[^@\s]+@[^@\s]+$/.test(body.email)) return refuse(res, 400, "Invalid Email Address Passed", { type: "validation_error", code: "invalid_params" });
      if (!Number.isSafeInteger(amount) || amount <= 0) return refuse(res, 400, "Invalid Amount Sent", { type: "validation_error", code: "invalid_params" });
      const currency = body.currency ?? "NGN";
      if (!CURRENCIES.includes(currency)) return refuse(res, 403, "Currency not supported by merchant", { type: "validation_error", code: "unsupported_currency" });
      const reference = typeof body.reference === "string" ? body.reference : code("T");
      if (!/^[A-Za-z0-9.=-]+$/.test(reference)) return refuse(res, 400, "Invalid transaction reference: only -, ., = and alphanumeric characters allowed", { type: "validation_error", code: "invalid_params" });
      if (transactions.has(reference)) return refuse(res, 400, "Duplicate Transaction Reference", { type: "validation_error", code: "duplicate_reference" });
      const accessCode = randomBytes(8).toString("hex");
      transactions.set(reference, {
        id: nextId++, reference, amount, currency, email: body.email, callback_url: body.callback_url ?? null, metadata: body.metadata ?? null,
        access_code: accessCode, status: "abandoned", paid_at: null, gateway_response: "The transaction was not completed", created_at: new Date().toISOString(),
      });
      return send(res, 200, { status: true, message: "Authorization URL created", data: { authorization_url: `${url}/checkout/${accessCode}`, access_code: accessCode, reference } });
    }

    if (req.method === "POST" && path === "/transaction/charge_authorization") {
      const authorization = authorizations.get(body?.authorization_code);
      if (!authorization) return refuse(res, 400, "Invalid authorization code", { type: "validation_error", code: "invalid_params" });
      if (!authorization.reusable) return refuse(res, 400, "This authorization is not reusable", { type: "validation_error", code: "invalid_params" });
      if (typeof body?.email !== "string" || !/^[^@\s]+@[^@\s]+$/.test(body.email)) return refuse(res, 400, "Invalid Email Address Passed", { type: "validation_error", code: "invalid_params" });
      if (!Number.isSafeInteger(body.amount) || body.amount <= 0) return refuse(res, 400, "Invalid Amount Sent", { type: "validation_error", code: "invalid_params" });
      const reference = typeof body.reference === "string" ? body.reference : code("T");
      if (transactions.has(reference)) return refuse(res, 400, "Duplicate Transaction Reference", { type: "validation_error", code: "duplicate_reference" });
      const outcome = switches.chargeOutcome;
      const accessCode = randomBytes(8).toString("hex");
      const now = new Date().toISOString();
      const t: FakeTransaction = {
        id: nextId++, reference, amount: body.amount, currency: body.currency ?? "NGN", email: body.email, callback_url: null, metadata: body.metadata ?? null, access_code: accessCode,
        status: outcome === "paused" ? "abandoned" : outcome, paid_at: outcome === "success" ? now : null,
        gateway_response: outcome === "success" ? "Approved" : outcome === "failed" ? "Declined" : "The transaction was not completed", created_at: now, authorization,
      };
      transactions.set(reference, t);
      if (switches.chargeReply === "error_after_create") return send(res, 502, { status: false, message: "Bad gateway" });
      if (switches.chargeReply === "duplicate_after_create") return refuse(res, 400, "Duplicate Transaction Reference", { type: "validation_error", code: "duplicate_reference" });
      if (outcome === "paused") {
        return send(res, 200, { status: true, message: "Please, redirect your customer to the authorization url provided", data: { authorization_url: `${url}/checkout/${accessCode}`, reference, access_code: accessCode, paused: true } });
      }
      return send(res, 200, { status: true, message: "Charge attempted", data: fake.verifyData(reference) });
    }

    // Balance: one entry per currency the account holds, in subunits (what a credentials check reads).
    if (req.method === "GET" && path === "/balance") {
      return send(res, 200, { status: true, message: "Balances retrieved", data: [{ currency: "KES", balance: 0 }] });
    }

    const verify = /^\/transaction\/verify\/([^/?]+)$/.exec(path);
    if (req.method === "GET" && verify) {
      const reference = decodeURIComponent(verify[1]!);
      if (!transactions.has(reference)) return refuse(res, 400, "Transaction reference not found", { type: "validation_error", code: "transaction_not_found" });
      return send(res, 200, { status: true, message: "Verification successful", data: fake.verifyData(reference) });
    }

    if (req.method === "POST" && path === "/transferrecipient") {
      const { type, name, account_number, bank_code, currency } = body ?? {};
      if (!["mobile_money", "nuban", "basa", "ghipss"].includes(type)) return refuse(res, 400, "Invalid recipient type", { type: "validation_error" });
      if (typeof name !== "string" || !name || typeof account_number !== "string" || !account_number || typeof bank_code !== "string" || !bank_code) {
        return refuse(res, 400, "Name, account number and bank code are required", { type: "validation_error" });
      }
      // Paystack returns the existing recipient for the same account.
      let recipient = [...recipients.values()].find((r) => r.type === type && r.details.account_number === account_number && r.details.bank_code === bank_code);
      if (!recipient) {
        recipient = { recipient_code: code("RCP_"), type, name, currency: currency ?? "NGN", details: { account_number, account_name: name, bank_code, bank_name: bank_code === "MPESA" ? "M-PESA" : "Test Bank" } };
        recipients.set(recipient.recipient_code, recipient);
      }
      return send(res, 201, { status: true, message: "Transfer recipient created successfully", data: { active: true, domain: "test", id: nextId++, integration: 100032, ...recipient } });
    }

    if (req.method === "POST" && path === "/transfer") {
      const { source, amount, recipient, reference, reason, currency } = body ?? {};
      if (source !== "balance") return refuse(res, 400, "Invalid transfer source", { type: "validation_error" });
      if (!recipients.has(recipient)) return refuse(res, 400, "Recipient specified is invalid", { type: "validation_error" });
      if (!Number.isSafeInteger(amount) || amount <= 0) return refuse(res, 400, "Invalid amount", { type: "validation_error" });
      if (typeof reference !== "string" || !/^[a-z0-9_-]{16,50}$/.test(reference)) {
        return refuse(res, 400, "Invalid transfer reference: lowercase alphanumerics, - and _ only, 16 to 50 characters", { type: "validation_error" });
      }
      if (transfers.has(reference)) return refuse(res, 400, "Duplicate Transaction Reference", { type: "validation_error", code: "duplicate_reference" });
      if (switches.insufficientBalance) return refuse(res, 400, "Your balance is not enough to fulfil this request", { type: "api_error", code: "insufficient_balance" });
      const now = new Date().toISOString();
      const transfer: FakeTransfer = { id: nextId++, reference, amount, currency: currency ?? "NGN", recipient_code: recipient, reason: reason ?? null, transfer_code: code("TRF_"), status: "pending", createdAt: now, updatedAt: now };
      transfers.set(reference, transfer);
      settleTransferLater(transfer);
      return send(res, 200, { status: true, message: "Transfer has been queued", data: { integration: 100032, domain: "test", amount, currency: transfer.currency, source, reason, recipient: nextId, status: "pending", transfer_code: transfer.transfer_code, id: transfer.id, reference, createdAt: now, updatedAt: now } });
    }

    const transferVerify = /^\/transfer\/verify\/([^/?]+)$/.exec(path);
    if (req.method === "GET" && transferVerify) {
      const reference = decodeURIComponent(transferVerify[1]!);
      if (!transfers.has(reference)) return refuse(res, 400, "Transfer not found", { type: "validation_error", code: "transfer_not_found" });
      return send(res, 200, { status: true, message: "Transfer retrieved", data: fake.transferData(reference) });
    }

    if (req.method === "POST" && path === "/refund") {
      const key = typeof body?.transaction === "string" || typeof body?.transaction === "number" ? String(body.transaction) : "";
      const t = transactions.get(key) ?? [...transactions.values()].find((x) => String(x.id) === key);
      if (!t) return refuse(res, 400, "Transaction not found", { type: "validation_error", code: "transaction_not_found" });
      if (t.status !== "success") return refuse(res, 400, "Cannot refund a transaction that was not successful", { type: "validation_error" });
      const refunded = [...refunds.values()].filter((r) => r.transaction === t && r.status !== "failed").reduce((sum, r) => sum + r.amount, 0);
      const amount = body.amount === undefined ? t.amount - refunded : body.amount;
      if (!Number.isSafeInteger(amount) || amount <= 0) return refuse(res, 400, "Invalid amount", { type: "validation_error" });
      if (amount > t.amount - refunded) return refuse(res, 400, "Refund amount cannot be more than the transaction amount left to refund", { type: "validation_error", code: "invalid_amount" });
      if (body.currency !== undefined && body.currency !== t.currency) return refuse(res, 400, "Currency does not match the transaction's", { type: "validation_error" });
      const now = new Date().toISOString();
      const refund: FakeRefund = { id: nextId++, transaction: t, amount, currency: t.currency, status: "pending", merchant_note: body.merchant_note ?? `Refund for transaction ${t.reference} by owner@example.com`, customer_note: body.customer_note ?? `Refund for transaction ${t.reference}`, createdAt: now, refunded_at: null };
      refunds.set(refund.id, refund);
      settleRefundLater(refund);
      if (switches.refundReply === "hang_after_create") return; // never answered: the socket closes with the fake
      if (switches.refundReply === "error_after_create") return send(res, 502, { status: false, message: "Bad gateway" });
      const { transaction: _id, ...rest } = fake.refundData(refund);
      return send(res, 200, {
        status: true,
        message: "Refund has been queued for processing",
        data: { ...rest, transaction: fake.verifyData(t.reference), expected_at: new Date(Date.now() + 10 * 86_400_000).toISOString(), fully_deducted: true, channel: null, updatedAt: now },
      });
    }

    const refundFetch = /^\/refund\/(\d+)$/.exec(path);
    if (req.method === "GET" && refundFetch) {
      const refund = refunds.get(Number(refundFetch[1]));
      if (!refund) return refuse(res, 404, "Refund not found", { type: "validation_error", code: "not_found" });
      return send(res, 200, { status: true, message: "Refund retrieved", data: fake.refundData(refund) });
    }

    const refundList = /^\/refund(?:\?(.*))?$/.exec(path);
    if (req.method === "GET" && refundList) {
      const query = new URLSearchParams(refundList[1] ?? "");
      const key = query.get("transaction");
      const perPage = Number(query.get("perPage") ?? 50);
      const page = Number(query.get("page") ?? 1);
      const all = [...refunds.values()].filter((r) => key === null || String(r.transaction.id) === key || r.transaction.reference === key).reverse();
      const items = all.slice((page - 1) * perPage, page * perPage).map((r) => fake.refundData(r));
      return send(res, 200, {
        status: true,
        message: "Refunds retrieved",
        data: items,
        meta: { total: all.length, skipped: (page - 1) * perPage, perPage: String(perPage), page, pageCount: Math.max(1, Math.ceil(all.length / perPage)), failedRefundCount: all.filter((r) => r.status === "failed").length },
      });
    }

    if (path.startsWith("/dispute")) return handleDispute(req, res, path, body);

    // GET /transaction and GET /settlement: one page of those created in [from, to] (either bound optional), newest first.
    const listed = /^\/(transaction|settlement)(?:\?(.*))?$/.exec(path);
    if (req.method === "GET" && listed) {
      const query = new URLSearchParams(listed[2] ?? "");
      const bound = (name: string) => (query.get(name) ? new Date(query.get(name)!).getTime() : null);
      const [from, to] = [bound("from"), bound("to")];
      if ((from !== null && Number.isNaN(from)) || (to !== null && Number.isNaN(to))) return refuse(res, 400, "Invalid date", { type: "validation_error" });
      const perPage = Math.min(Number(query.get("perPage") ?? 50) || 50, switches.listMaxPerPage);
      const page = Math.max(1, Number(query.get("page") ?? 1) || 1);
      const within = (at: string) => (from === null || Date.parse(at) >= from) && (to === null || Date.parse(at) <= to);
      const rows =
        listed[1] === "transaction"
          ? [...transactions.values()].filter((t) => within(t.created_at)).reverse().map((t) => ({ ...fake.verifyData(t.reference), createdAt: t.created_at, paidAt: t.paid_at }))
          : settlements.filter((x) => within(x.createdAt)).reverse().map((x) => ({ ...x, domain: "test", integration: 100032, deductions: null, settled_by: null, updatedAt: x.createdAt }));
      const items = rows.slice((page - 1) * perPage, page * perPage);
      return send(res, 200, {
        status: true,
        message: listed[1] === "transaction" ? "Transactions retrieved" : "Settlements retrieved",
        data: items,
        meta: {
          total: rows.length, skipped: (page - 1) * perPage, perPage, page, pageCount: Math.max(1, Math.ceil(rows.length / perPage)),
          ...(listed[1] === "transaction" ? { total_volume: rows.filter((r) => r.status === "success").reduce((sum, r) => sum + Number((r as { amount?: number }).amount ?? 0), 0) } : {}),
        },
      });
    }

    return refuse(res, 404, "Not found");
  }

  /** Paystack's dispute routes (providers.md, Disputes). */
  function handleDispute(req: IncomingMessage, res: ServerResponse, path: string, body: any) {
    const [pathname, search = ""] = path.split("?", 2) as [string, string?];
    const query = new URLSearchParams(search);
    const newestFirst = (of: (d: FakeDispute) => boolean) => [...disputes.values()].filter(of).reverse();

    if (req.method === "GET" && pathname === "/dispute") {
      const key = query.get("transaction");
      const all = newestFirst((d) => key === null || String(d.transaction.id) === key);
      const perPage = Number(query.get("perPage") ?? 50) || 50;
      const page = Math.max(1, Number(query.get("page") ?? 1) || 1);
      const items = all.slice((page - 1) * perPage, page * perPage).map((d) => fake.disputeData(d));
      return send(res, 200, { status: true, message: "Disputes retrieved", data: items, meta: { total: all.length, skipped: (page - 1) * perPage, perPage, page, pageCount: Math.max(1, Math.ceil(all.length / perPage)) } });
    }

    const ofTransaction = /^\/dispute\/transaction\/(\d+)$/.exec(pathname);
    if (req.method === "GET" && ofTransaction) {
      const d = newestFirst((x) => String(x.transaction.id) === ofTransaction[1])[0];
      if (!d) return refuse(res, 404, "Dispute not found", { type: "validation_error", code: "not_found" });
      return send(res, 200, { status: true, message: "Dispute retrieved successfully", data: fake.disputeData(d) });
    }

    const route = /^\/dispute\/(\d+)(?:\/(upload_url|evidence|resolve))?$/.exec(pathname);
    const d = route ? disputes.get(Number(route[1])) : undefined;
    if (!route) return refuse(res, 404, "Not found");
    if (!d) return refuse(res, 404, "Dispute not found", { type: "validation_error", code: "not_found" });
    const action = `${req.method} ${route[2] ?? ""}`;
    const now = new Date().toISOString();

    if (action === "GET ") return send(res, 200, { status: true, message: "Dispute retrieved", data: fake.disputeData(d) });

    if (action === "GET upload_url") {
      const requestedName = query.get("upload_filename");
      if (!requestedName) return refuse(res, 400, "upload_filename is required", { type: "validation_error", code: "missing_params" });
      const fileName = `${randomBytes(10).toString("hex")}${/\.[A-Za-z0-9]{1,5}$/.exec(requestedName)?.[0] ?? ""}`;
      const signature = randomBytes(16).toString("hex");
      uploads.set(fileName, { disputeId: d.id, requestedName, signature, bytes: null, contentType: null });
      return send(res, 200, { status: true, message: "Upload url generated", data: { signedUrl: `${url}/uploads/${fileName}?X-Amz-Signature=${signature}`, fileName } });
    }

    if (action === "POST evidence") {
      for (const field of ["customer_email", "customer_name", "customer_phone", "service_details"]) {
        if (typeof body?.[field] !== "string" || !body[field]) return refuse(res, 400, `${field} is required`, { type: "validation_error", code: "missing_params" });
      }
      const { customer_email, customer_name, customer_phone, service_details, delivery_address, delivery_date } = body;
      if (delivery_date !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(delivery_date)) return refuse(res, 400, "delivery_date must be a date (YYYY-MM-DD)", { type: "validation_error", code: "invalid_params" });
      d.evidence = {
        customer_email, customer_name, customer_phone, service_details, ...(delivery_address === undefined ? {} : { delivery_address }), ...(delivery_date === undefined ? {} : { delivery_date }),
        dispute: d.id, id: nextId++, createdAt: now, updatedAt: now,
      };
      return send(res, 200, { status: true, message: "Evidence created", data: d.evidence });
    }

    if (action === "PUT resolve") {
      const { resolution, message, refund_amount, uploaded_filename, evidence } = body ?? {};
      if (resolution !== "merchant-accepted" && resolution !== "declined") return refuse(res, 400, "resolution must be one of merchant-accepted, declined", { type: "validation_error", code: "invalid_params" });
      if (typeof message !== "string" || !message) return refuse(res, 400, "message is required", { type: "validation_error", code: "missing_params" });
      if (!Number.isSafeInteger(refund_amount) || refund_amount < 0) return refuse(res, 400, "refund_amount is required", { type: "validation_error", code: "missing_params" });
      if (refund_amount > d.transaction.amount) return refuse(res, 400, "Refund amount cannot be greater than initial amount", { type: "validation_error", code: "invalid_params" });
      if (typeof uploaded_filename !== "string") return refuse(res, 400, "uploaded_filename is required", { type: "validation_error", code: "missing_params" });
      // A file it names must be one uploaded for this dispute; sent empty, none is attached.
      if (uploaded_filename && uploads.get(uploaded_filename)?.disputeId !== d.id) return refuse(res, 400, "Uploaded file not found", { type: "validation_error", code: "invalid_params" });
      if (evidence !== undefined && evidence !== d.evidence?.id) return refuse(res, 400, "Evidence not found", { type: "validation_error", code: "invalid_params" });
      if (d.status === "resolved" || d.status === "archived") return refuse(res, 400, "Dispute has already been resolved", { type: "validation_error", code: "invalid_params" });
      d.resolves.push(body);
      d.refund_amount = refund_amount;
      d.updatedAt = now;
      d.messages.push({ sender: "owner@example.com", body: message, at: now });
      if (resolution === "merchant-accepted") {
        Object.assign(d, { status: "resolved", resolution, resolvedAt: now });
        d.transaction.status = "reversed";
      } else {
        d.status = "awaiting-bank-feedback";
      }
      d.history.push({ status: d.status, by: "owner@example.com", at: now });
      return send(res, 200, { status: true, message: "Dispute successfully resolved", data: fake.disputeData(d) });
    }

    return refuse(res, 404, "Not found");
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const bytes = Buffer.concat(chunks);
      handle(req, res, bytes.toString("utf8"), bytes).catch((error: unknown) => {
        if (!res.headersSent) refuse(res, 500, (error as Error).message);
      });
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.url = url;
  return fake;
}

export type FakePaystack = Awaited<ReturnType<typeof startFakePaystack>>;
