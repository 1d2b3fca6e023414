import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Principal } from "../../auth.ts";
import type { MailConfig } from "../../config.ts";
import type { PrismaClient } from "../../db/database.ts";
import type { MailMessage } from "../../db/generated/prisma/client.ts";
import { addDays, localDay, localHour, startOfLocalDay } from "../../days.ts";
import { GatewayError, NotFoundError } from "../../errors.ts";
import type { BatchOutcome, JobOutcome, JobRunner } from "../../jobs/runner.ts";
import { enqueue } from "../../jobs/store.ts";
import type { Logger } from "../../logger.ts";
import { reasonText } from "../../checkout/i18n.ts";
import { readableAccent } from "../../checkout/layout.ts";
import type { BrandService, MailIdentity } from "../brand/service.ts";
import { logoPath } from "../brand/service.ts";
import type { CustomerService } from "../customers/service.ts";
import type { RefundService } from "../refunds/service.ts";
import type { ReportService } from "../reports/service.ts";
import type { TransactionService } from "../transactions/service.ts";
import { NOTICE_KINDS, type MailBrand, type MailLanguage, type Notice, type PayerMail, type PaymentFacts, type RefundFacts, type RenderedMail } from "./content.ts";
import * as store from "./store.ts";
import { formatDateTime, mailCatalogues, methodText, oneLine, renderNotice, renderPayerMail } from "./templates.ts";
import type { CheckoutReceipt } from "../../checkout/page.ts";
import { createSmtpTransport, type MailTransport } from "./transport.ts";

/**
 * E-mail: receipts and invoices to payers, notices to the merchant's team. Messages are rows written with the
 * event that calls for them (store.ts's fan-out) and sent by one job each (`mail.send`): rendered once (a retry
 * sends the same words), then handed to SMTP, or, with no SMTP server configured, kept as the test inbox in test
 * mode and skipped in live mode. A temporary SMTP failure retries on MAIL_RETRY_SCHEDULE; a permanent one (5xx)
 * is recorded on the message and not retried.
 */

export const DAILY_SUMMARY_JOB = "mail.daily_summaries";
const SUMMARY_KEY = { schedule: "daily_summaries" } as const;
/** How often the daily summaries are looked for: each merchant's 08:00 comes in its own zone. */
const SUMMARY_EVERY_MS = 15 * 60_000;
const SUMMARY_HOUR = 8;
/** A payment's receipt may be sent again this many times an hour (each resend is an e-mail to the payer). */
export const RESENDS_PER_HOUR = 3;
const LOGO_CID = "logo@receipt";
/** Messages sent in one batch at most, and in flight per instance (SMTP's pool takes 3 connections at a time). */
const MAIL_BATCH_SIZE = 20;

const emailAddress = z.string().max(254).pipe(z.email());
/** An address the gateway will write to: a plain e-mail address, no display name, no line breaks (header injection). */
export const isMailAddress = (value: string | null | undefined): value is string => !!value && !/[\r\n\0]/.test(value) && emailAddress.safeParse(value).success;

const asLanguage = (value: string | null | undefined): MailLanguage => (value === "sw" ? "sw" : "en");

export interface MailServiceDeps {
  prisma: PrismaClient;
  jobs: JobRunner;
  logger: Logger;
  config: { mail: MailConfig; publicBaseUrl: string };
  transactions: Pick<TransactionService, "paidWith" | "paidWithMany" | "getByReference">;
  refunds: Pick<RefundService, "completedOf" | "findWithPayment">;
  customers: Pick<CustomerService, "getCustomers">;
  brand: Pick<BrandService, "mailIdentity" | "logo">;
  reports: Pick<ReportService, "dayTotals">;
  /** Another transport (tests use the real one against a loopback SMTP server; this is for the CLI's dry runs). */
  transport?: MailTransport | null;
}

type Facts = { to: string; lang: MailLanguage; rendered: RenderedMail; identity: MailIdentity } | { skip: string };

type Paid = NonNullable<Awaited<ReturnType<TransactionService["paidWith"]>>>;

/**
 * The records a message's words are made of. Read one at a time (the receipt page), or for a whole batch of messages
 * up front, one statement each (a morning's renewals queue a receipt and an invoice each): batchReads.
 */
interface MailReads {
  paid(transactionId: number): Promise<Paid | null>;
  receiptToken(t: { id: number; merchantId: number }): Promise<string>;
  event(message: MailMessage): Promise<Record<string, unknown> | null>;
  customerEmail(message: MailMessage, customerId: number): Promise<string | null>;
}

export function createMailService(deps: MailServiceDeps) {
  const { prisma, logger, config } = deps;
  const transport = deps.transport !== undefined ? deps.transport : createSmtpTransport(config.mail);
  if (!transport) logger.info("no SMTP_URL: e-mail is not sent (test-mode messages are kept in the dashboard's Inbox)");
  const base = config.publicBaseUrl;
  const dashboard = (path: string) => `${base}/dashboard${path}`;
  const senderDomain = /@([^\s>]+)>?\s*$/.exec(config.mail.from)?.[1] ?? "localhost";

  const brandOf = (identity: MailIdentity, logoSrc: string | null): MailBrand => ({
    name: identity.name,
    accentColor: readableAccent(identity.accentColor),
    supportEmail: identity.supportEmail,
    website: identity.website,
    logoSrc,
  });

  const singleReads: MailReads = {
    paid: (transactionId) => deps.transactions.paidWith(transactionId),
    receiptToken: (t) => store.receiptToken(prisma, t),
    event: async (message) => (message.eventId === null ? null : ((await store.eventPayloads(prisma, [message.eventId])).get(message.eventId) ?? null)),
    async customerEmail(message, customerId) {
      const [customer] = await deps.customers.getCustomers([{ principal: systemPrincipal(message), id: customerId }]);
      return customer && !(customer instanceof Error) ? customer.email : null;
    },
  };

  /**
   * The reads of a batch of messages to render, made up front: their events, the payments their receipts are of
   * (with each completed one's receipt token) and their invoices' customers, one statement each. A message they
   * missed reads on its own.
   */
  async function batchReads(messages: MailMessage[]): Promise<MailReads> {
    const events = await store.eventPayloads(prisma, messages.flatMap((m) => (m.eventId === null ? [] : [m.eventId])));
    const receiptIds = messages.flatMap((m) => (m.kind === "payment_receipt" && m.transactionId !== null ? [m.transactionId] : []));
    const invoiceOf = (m: MailMessage) => (m.kind === "invoice" || m.kind === "invoice_payment_failed" ? (events.get(m.eventId!)?.invoice as Record<string, unknown> | undefined) : undefined);
    const customerRequests = messages.flatMap((m) => {
      const invoice = invoiceOf(m);
      return invoice ? [{ principal: systemPrincipal(m), id: Number(invoice.customer) }] : [];
    });
    const [paid, customers] = await Promise.all([
      receiptIds.length ? deps.transactions.paidWithMany(receiptIds) : new Map<number, Paid>(),
      customerRequests.length ? deps.customers.getCustomers(customerRequests) : [],
    ]);
    const completed = [...paid.values()].filter((p) => p.transaction.status === "completed").map((p) => p.transaction);
    const tokens = await store.receiptTokens(prisma, completed);
    const emails = new Map(customerRequests.map((request, i) => [`${request.principal.merchantId}:${request.principal.mode}:${request.id}`, customers[i]]));
    return {
      paid: (transactionId) => (paid.has(transactionId) ? Promise.resolve(paid.get(transactionId)!) : singleReads.paid(transactionId)),
      receiptToken: (t) => (tokens.has(t.id) ? Promise.resolve(tokens.get(t.id)!) : singleReads.receiptToken(t)),
      event: (message) => (message.eventId !== null && events.has(message.eventId) ? Promise.resolve(events.get(message.eventId)!) : singleReads.event(message)),
      customerEmail(message, customerId) {
        const customer = emails.get(`${message.merchantId}:${message.mode}:${customerId}`);
        if (customer === undefined) return singleReads.customerEmail(message, customerId);
        return Promise.resolve(customer instanceof Error ? null : customer.email);
      },
    };
  }

  /** A completed payment as its receipt shows it. */
  async function paymentFacts(
    transactionId: number,
    known?: { merchantId: number; identity: MailIdentity },
    reads: MailReads = singleReads,
  ): Promise<{ payment: PaymentFacts; email: string | null; language: string | null; merchantId: number } | null> {
    const paid = await reads.paid(transactionId);
    if (!paid || paid.transaction.status !== "completed") return null;
    const { transaction: t, attempt } = paid;
    // The send job has the merchant's identity already; the receipt page asks for it here.
    const identity = known?.merchantId === t.merchantId ? known.identity : await deps.brand.mailIdentity(t.merchantId);
    const method: PaymentFacts["method"] =
      t.paymentMethod === "card"
        ? { kind: "card", brand: attempt?.cardBrand ?? null, last4: attempt?.detail?.replace(/\D/g, "").slice(-4) || null }
        : t.paymentMethod?.startsWith("momo")
          ? { kind: "mpesa", receiptCode: t.providerReference, phone: attempt?.detail ?? null }
          : { kind: "other" };
    const token = await reads.receiptToken(t);
    return {
      merchantId: t.merchantId,
      email: t.email,
      language: attempt?.language ?? null,
      payment: {
        mode: t.mode,
        amount: t.amount,
        currency: t.currency,
        paidAt: t.completedAt ?? t.updatedAt,
        timezone: identity?.timezone ?? "UTC",
        reference: t.reference,
        clientReference: t.clientReference,
        method,
        description: t.description,
        amountRefunded: t.amountRefunded,
        receiptUrl: `${base}/receipts/${token}`,
      },
    };
  }

  /** The words of a message to a payer, and who it goes to; or why it is not sent. */
  async function payerMail(message: MailMessage, identity: MailIdentity, reads: MailReads): Promise<Facts> {
    let mail: PayerMail;
    let to: string | null;
    let language: string | null = null;
    if (message.kind === "payment_receipt" || message.kind === "refund_receipt") {
      let transactionId = message.transactionId;
      let refund: RefundFacts | null = null;
      if (message.kind === "refund_receipt") {
        const event = await reads.event(message);
        const found = await deps.refunds.findWithPayment(Number((event?.refund as { id?: unknown } | undefined)?.id));
        if (!found) return { skip: "the refund is no longer on record" };
        transactionId = found.transactionId;
        refund = { reference: found.reference, amount: found.amount, refundedAt: found.completedAt ?? found.updatedAt };
      }
      const facts = transactionId === null ? null : await paymentFacts(transactionId, { merchantId: message.merchantId, identity }, reads);
      if (!facts) return { skip: "the payment is not completed" };
      to = facts.email;
      language = facts.language;
      mail = refund ? { kind: "refund_receipt", payment: facts.payment, refund } : { kind: "payment_receipt", payment: facts.payment };
    } else {
      const event = await reads.event(message);
      const invoice = event?.invoice as Record<string, unknown> | undefined;
      if (!invoice) return { skip: "the invoice is no longer on record" };
      to = await reads.customerEmail(message, Number(invoice.customer));
      const nextAction = invoice.next_action as { url?: string } | null;
      const date = (value: unknown) => (typeof value === "string" ? new Date(value) : new Date(message.createdAt));
      const facts = {
        mode: message.mode,
        reference: String(invoice.id),
        planName: null,
        amount: BigInt(String(invoice.amount_due ?? 0)),
        currency: String(invoice.currency),
        periodStart: date(invoice.period_start),
        periodEnd: date(invoice.period_end),
        dueAt: date(invoice.period_start),
        timezone: identity.timezone,
        failureReason: message.kind === "invoice_payment_failed" ? await chargeFailure(message, invoice, identity) : null,
        nextAttemptAt: typeof invoice.next_attempt_at === "string" ? new Date(invoice.next_attempt_at) : null,
        payUrl: nextAction?.url ?? null,
      };
      mail = message.kind === "invoice" ? { kind: "invoice", invoice: facts } : { kind: "invoice_payment_failed", invoice: facts };
    }
    if (!to) return { skip: "the payer gave no e-mail address" };
    // An address that is not one is never written to (no mail; the message says why, on the payment's record).
    if (!isMailAddress(to)) return { skip: `the payer's e-mail "${String(to).replace(/[\p{Cc}]/gu, " ").slice(0, 100)}" is not an e-mail address` };
    const lang = asLanguage(language ?? identity.language);
    return { to, lang, identity, rendered: renderPayerMail(mail, brandOf(identity, identity.logoHash ? `cid:${LOGO_CID}` : null), lang) };
  }

  /** The words of a notice to one of the team. */
  async function noticeMail(message: MailMessage, identity: MailIdentity, reads: MailReads): Promise<Facts> {
    const user = message.userId === null ? null : await prisma.user.findUnique({ where: { id: message.userId } });
    if (!user || user.disabledAt) return { skip: "the user no longer exists or was disabled" };
    if (!isMailAddress(user.email)) return { skip: "the user's e-mail is not an address" };
    const event = await reads.event(message);
    const facts = (message.facts ?? {}) as Record<string, unknown>;
    const mode = message.mode;
    const money = (o: Record<string, unknown>) => ({ amount: BigInt(String(o.amount ?? 0)), currency: String(o.currency ?? "") });
    let notice: Notice;
    switch (message.kind) {
      case "payout_failed": {
        const p = (event?.payout ?? {}) as Record<string, unknown>;
        notice = { kind: "payout_failed", mode, reference: String(p.reference), ...money(p), recipient: (p.phone_number as string) ?? null, reason: (p.failure_reason as string) ?? null, dashboardUrl: dashboard("/payouts") };
        break;
      }
      case "refund_failed": {
        const r = (event?.refund ?? {}) as Record<string, unknown>;
        notice = { kind: "refund_failed", mode, reference: String(r.reference), transactionReference: String(r.transaction_reference), ...money(r), reason: (r.failure_reason as string) ?? null, dashboardUrl: dashboard("/refunds") };
        break;
      }
      case "dispute_opened":
      case "dispute_reminder": {
        const d = (event?.dispute ?? {}) as Record<string, unknown>;
        notice = {
          kind: message.kind,
          mode,
          reference: String(d.id),
          transactionReference: String(d.transaction_reference),
          ...money(d),
          reason: (d.reason as string) ?? null,
          dueBy: typeof d.due_by === "string" ? new Date(d.due_by) : null,
          timezone: identity.timezone,
          dashboardUrl: dashboard("/disputes"),
        };
        break;
      }
      case "webhook_disabled":
        notice = { kind: "webhook_disabled", mode, url: String(facts.url), reason: (facts.reason as string) ?? null, dashboardUrl: dashboard("/webhooks") };
        break;
      case "daily_summary": {
        const totals = ((facts.totals ?? []) as Record<string, unknown>[]).map((row) => ({
          currency: String(row.currency),
          payments: Number(row.payments),
          volume: BigInt(String(row.volume)),
          refunds: Number(row.refunds),
          refunded: BigInt(String(row.refunded)),
          failures: Number(row.failures),
        }));
        notice = { kind: "daily_summary", mode, day: String(facts.day), timezone: identity.timezone, totals, dashboardUrl: dashboard("/") };
        break;
      }
      default:
        return { skip: `unknown kind ${message.kind}` };
    }
    const lang = asLanguage(identity.language);
    return { to: user.email, lang, identity, rendered: renderNotice(notice, brandOf(identity, identity.logoHash ? `cid:${LOGO_CID}` : null), lang) };
  }

  /** Why an invoice's last charge failed, in the reader's words as the checkout page says them (else the provider's). */
  async function chargeFailure(message: MailMessage, invoice: Record<string, unknown>, identity: MailIdentity): Promise<string | null> {
    const last = (invoice.charges as { transaction_reference?: string; failure_code?: string | null }[] | undefined)?.at(-1);
    if (!last?.transaction_reference) return null;
    const charge = await deps.transactions.getByReference(systemPrincipal(message), last.transaction_reference).catch(() => null);
    return reasonText(asLanguage(identity.language), charge?.failureCode ?? last.failure_code ?? null, charge?.failureReason ?? null);
  }

  /** Who the system reads a merchant's own records as (a customer of an invoice). */
  const systemPrincipal = (message: MailMessage): Principal => ({ merchantId: message.merchantId, mode: message.mode, role: "owner", userId: null, keyId: null, keyPrefix: null });

  const retryDelay = (attempt: number) => {
    const schedule = config.mail.retryScheduleMs;
    return schedule[Math.min(attempt - 1, schedule.length - 1)]!;
  };

  /** No SMTP server: a test-mode message is kept for the dashboard's test inbox; a live one is not sent. */
  const withoutTransport = (message: MailMessage) =>
    message.mode === "test" ? { status: "kept" as const } : { status: "skipped" as const, error: "no SMTP server is configured (SMTP_URL)" };

  /**
   * One try of one message (its row and its merchant's identity read by the batch): rendered once and stored (a retry
   * sends the same words), then handed to SMTP; without SMTP kept (test mode) or skipped (live). Its outcome goes to
   * `record`: the batch writes its messages' outcomes together.
   */
  async function sendMessage(message: MailMessage, identity: MailIdentity, attempt: number, reads: MailReads, record: (write: Omit<store.OutcomeWrite, "id">) => void): Promise<JobOutcome> {
    let to = message.toAddress;
    let rendered: RenderedMail | null = message.subject && message.textBody && message.htmlBody ? { subject: message.subject, text: message.textBody, html: message.htmlBody } : null;
    if (!rendered || !to) {
      const facts = (NOTICE_KINDS as readonly string[]).includes(message.kind) ? await noticeMail(message, identity, reads) : await payerMail(message, identity, reads);
      if ("skip" in facts) {
        record({ outcome: { status: "skipped", error: facts.skip } });
        return;
      }
      to = facts.to;
      rendered = facts.rendered;
      const fields = { toAddress: to, language: facts.lang, subject: rendered.subject, textBody: rendered.text, htmlBody: rendered.html };
      if (!transport) {
        record({ outcome: withoutTransport(message), rendered: fields });
        return;
      }
      await store.recordRendered(prisma, message.id, fields);
    }
    if (!transport) {
      record({ outcome: withoutTransport(message) });
      return;
    }
    const logo = identity.logoHash && rendered.html.includes(`cid:${LOGO_CID}`) ? await deps.brand.logo(message.merchantId, identity.logoHash) : null;
    const payer = !(NOTICE_KINDS as readonly string[]).includes(message.kind);
    const outcome = await transport.send({
      messageId: `<m${message.id}.${message.createdAt.getTime()}@${senderDomain}>`,
      from: config.mail.from,
      to,
      replyTo: payer ? (identity.replyTo ?? identity.supportEmail ?? undefined) : undefined,
      subject: rendered.subject,
      text: rendered.text,
      html: rendered.html,
      logo: logo ? { cid: LOGO_CID, bytes: logo.bytes, type: logo.type } : undefined,
    });
    if (outcome.sent) {
      record({ outcome: { status: "sent" } });
      return;
    }
    const giveUp = outcome.permanent || attempt > config.mail.retryScheduleMs.length;
    record({ outcome: { status: giveUp ? "failed" : "queued", error: outcome.error } });
    if (giveUp) {
      logger.warn({ messageId: message.id, kind: message.kind, error: outcome.error }, "e-mail not sent");
      return;
    }
    return { retryInMs: retryDelay(attempt), error: outcome.error };
  }

  // In batches: a morning's renewals queue a receipt and an invoice each, and the messages' rows, their merchants'
  // identities and the jobs' completion are read and written once per batch, not once per message.
  deps.jobs.register<{ messageId: number }>({
    kind: store.MAIL_SEND_JOB,
    // Receipts and notices can wait a few minutes for the payments that cause them (a morning's renewals): they yield.
    yields: true,
    concurrency: MAIL_BATCH_SIZE,
    batchSize: MAIL_BATCH_SIZE,
    async runBatch(batch) {
      const messages = new Map((await store.findMessages(prisma, batch.map(({ payload }) => Number(payload.messageId)))).map((m) => [m.id, m]));
      const reads = await batchReads([...messages.values()].filter((m) => m.status === "queued" && !(m.toAddress && m.subject && m.textBody && m.htmlBody)));
      const identities = new Map<number, Promise<MailIdentity | null>>();
      const identityOf = (merchantId: number) => {
        let identity = identities.get(merchantId);
        if (!identity) identities.set(merchantId, (identity = deps.brand.mailIdentity(merchantId)));
        return identity;
      };
      const writes: store.OutcomeWrite[] = [];
      const outcomes = await Promise.all(
        batch.map(async ({ payload, job }): Promise<BatchOutcome> => {
          try {
            const message = messages.get(Number(payload.messageId));
            if (!message || message.status !== "queued") return undefined;
            const identity = await identityOf(message.merchantId);
            if (!identity) return undefined;
            return await sendMessage(message, identity, job.attempt, reads, (write) => writes.push({ id: message.id, ...write }));
          } catch (error) {
            return error instanceof Error ? error : new Error(String(error));
          }
        }),
      );
      // Before the runner settles the jobs: a message done is marked so before its job is deleted (a failed write fails
      // the batch, whose messages are tried again: at least once, as a failed write of one message always was).
      await store.recordOutcomes(prisma, writes);
      return outcomes;
    },
  });

  // ---- The daily summary ----


  /**
   * Queues yesterday's summary for every merchant whose local time is past 08:00, once per merchant, mode and day
   * (the message's key), to each of the team who wants it; a mode with nothing that day sends none.
   */
  async function queueDailySummaries(now = new Date()): Promise<number> {
    const merchants = await prisma.merchant.findMany({ select: { id: true, timezone: true }, where: { users: { some: { disabledAt: null } } } });
    let queued = 0;
    for (const merchant of merchants) {
      if (localHour(now, merchant.timezone) < SUMMARY_HOUR) continue;
      const today = localDay(now, merchant.timezone);
      const day = addDays(today, -1);
      const from = startOfLocalDay(day, merchant.timezone);
      const to = startOfLocalDay(today, merchant.timezone);
      for (const mode of ["live", "test"] as const) {
        const keyPrefix = `summary:${merchant.id}:${mode}:${day}`;
        if (await store.noticeQueued(prisma, merchant.id, keyPrefix)) continue;
        const totals = await deps.reports.dayTotals(merchant.id, mode, from, to);
        if (totals.length === 0) continue;
        const facts = { day, totals: totals.map((t) => ({ ...t, volume: t.volume.toString(), refunded: t.refunded.toString() })) };
        queued += await prisma.$transaction((tx) => store.insertNotices(tx, { merchantId: merchant.id, mode, kind: "daily_summary", keyPrefix, facts }));
      }
    }
    if (queued > 0) deps.jobs.nudge();
    return queued;
  }

  const queueNextSummaryRun = (runAt: Date) => enqueue(prisma, DAILY_SUMMARY_JOB, { ...SUMMARY_KEY }, { key: SUMMARY_KEY, runAt });

  deps.jobs.register<Record<string, never>>({
    kind: DAILY_SUMMARY_JOB,
    concurrency: 1,
    // Never throws: the runner's retry would be a second copy beside the one queued here.
    async run() {
      try {
        await queueDailySummaries();
      } catch (error) {
        logger.warn({ err: error }, "daily summaries failed; trying again at the next run");
      }
      await queueNextSummaryRun(new Date(Date.now() + SUMMARY_EVERY_MS));
    },
  });

  return {
    /** Who every message is from (MAIL_FROM). */
    sender: config.mail.from,
    /** Queues the daily summaries' run (at gateway start); at most one stays queued. */
    scheduleDailySummaries: () => queueNextSummaryRun(new Date()),
    queueDailySummaries,

    /** A notice to the team that is not an event's (a webhook endpoint disabled), in the caller's transaction. */
    insertNotices: store.insertNotices,

    /**
     * Sends a completed payment's receipt again, to the payer's address (owner; RESENDS_PER_HOUR per payment). A new
     * message of its own: the first one's record stays as it was.
     */
    async resendReceipt(principal: Principal, reference: string): Promise<MailMessage> {
      const t = await deps.transactions.getByReference(principal, reference);
      if (t.status !== "completed") throw new GatewayError("conflict", `Only a completed payment has a receipt; this one is ${t.status}`);
      if (!isMailAddress(t.email)) throw new GatewayError("validation_failed", "The payment has no e-mail address to send its receipt to");
      const since = new Date(Date.now() - 3_600_000);
      const recent = await prisma.mailMessage.count({ where: { transactionId: t.id, key: { startsWith: `resend:${t.id}:` }, createdAt: { gte: since } } });
      if (recent >= RESENDS_PER_HOUR) throw new GatewayError("rate_limited", `This receipt was sent again ${RESENDS_PER_HOUR} times in the last hour; try again later`);
      const key = `resend:${t.id}:${randomUUID()}`;
      await prisma.$transaction((tx) => store.insertMessages(tx, [{ merchantId: t.merchantId, mode: t.mode, kind: "payment_receipt", key, transactionId: t.id }]));
      deps.jobs.nudge();
      return (await prisma.mailMessage.findUnique({ where: { key } }))!;
    },

    /** The merchant's messages of the caller's mode, newest first: the test inbox, and a payment's messages. */
    async list(principal: Principal, options: { status?: string | null; transaction?: string | null; first: number; offset: number }) {
      const transactionId = options.transaction ? (await deps.transactions.getByReference(principal, options.transaction)).id : undefined;
      const [items, total] = await store.listMessages(prisma, principal, {
        ...(options.status ? { status: options.status } : {}),
        ...(transactionId !== undefined ? { transactionId } : {}),
        take: Math.min(Math.max(options.first, 1), 100),
        skip: Math.max(options.offset, 0),
      });
      return { items, total };
    },

    async get(principal: Principal, id: number): Promise<MailMessage> {
      const message = await store.findScopedMessage(prisma, principal, id);
      if (!message) throw new NotFoundError("Message");
      return message;
    },

    /** What the public receipt page shows for its token (null: no such receipt); receipt-page.ts renders it. */
    async receiptView(token: string): Promise<{ brand: MailBrand; payment: PaymentFacts; refunds: RefundFacts[] } | null> {
      if (!/^[A-Za-z0-9_-]{22}$/.test(token)) return null;
      const receipt = await store.findReceipt(prisma, token);
      if (!receipt) return null;
      const facts = await paymentFacts(receipt.transactionId);
      if (!facts) return null;
      const identity = (await deps.brand.mailIdentity(facts.merchantId))!;
      const refunds = (await deps.refunds.completedOf(receipt.transactionId)).map((r) => ({ reference: r.reference, amount: r.amount, refundedAt: r.completedAt ?? r.updatedAt }));
      const brand = brandOf(identity, identity.logoHash ? logoPath(facts.merchantId, identity.logoHash) : null);
      return { brand, payment: facts.payment, refunds };
    },

    /** A completed payment's essentials for the checkout's success page, in the page's language; null when not completed. */
    async checkoutReceipt(transactionId: number, lang: MailLanguage): Promise<CheckoutReceipt | null> {
      const facts = await paymentFacts(transactionId);
      if (!facts) return null;
      const identity = await deps.brand.mailIdentity(facts.merchantId);
      const { payment } = facts;
      return {
        // Same origin as the page the payer is on, whatever PUBLIC_BASE_URL says.
        url: new URL(payment.receiptUrl).pathname,
        method: oneLine(methodText(payment.method, mailCatalogues[lang])),
        paidAt: formatDateTime(payment.paidAt, payment.timezone, lang),
        clientReference: payment.clientReference,
        website: identity?.website ?? null,
      };
    },

    /** The team member's notice kinds they opted out of, replaced (their profile page). */
    async setOptOuts(principal: Principal, kinds: string[]): Promise<string[]> {
      if (principal.userId === null) throw new GatewayError("forbidden", "Only a signed-in user has notice preferences");
      const unknown = kinds.filter((k) => !(NOTICE_KINDS as readonly string[]).includes(k));
      if (unknown.length) throw new GatewayError("validation_failed", `Unknown notice kind(s): ${unknown.join(", ")}; known: ${NOTICE_KINDS.join(", ")}`);
      const user = await prisma.user.update({ where: { id: principal.userId }, data: { mailOptOuts: [...new Set(kinds)] }, select: { mailOptOuts: true } });
      return user.mailOptOuts;
    },

    async optOuts(principal: Principal): Promise<string[]> {
      if (principal.userId === null) return [];
      const user = await prisma.user.findFirst({ where: { id: principal.userId, merchantId: principal.merchantId }, select: { mailOptOuts: true } });
      return user?.mailOptOuts ?? [];
    },

    close: () => transport?.close(),
  };
}

export type MailService = ReturnType<typeof createMailService>;
