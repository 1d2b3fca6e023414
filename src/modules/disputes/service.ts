import { z } from "zod";
import type { Principal } from "../../auth.ts";
import type { Reader } from "../../db/database.ts";
import type { Dispute, PaymentChannel, Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import type { JobDefinition } from "../../jobs/runner.ts";
import { enqueue, reschedule } from "../../jobs/store.ts";
import type { Logger } from "../../logger.ts";
import { filteredList } from "../../paging.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { Connectors } from "../../providers/index.ts";
import type { DisputeConnector, DisputeEvidence, DisputeQuery, DisputeState, DisputedPayment, ProviderDispute } from "../../providers/types.ts";
import { randomReference } from "../../references.ts";
import { optionalTextSchema, parseInput, refuse, unsafeText } from "../../validation.ts";
import type { ChannelService } from "../channels/service.ts";
import { afterCommit, applyTransition, type StatusMachineDeps } from "../events/status-machine.ts";
import type { TransactionService } from "../transactions/service.ts";
import * as store from "./store.ts";
import { DISPUTE_CHECK_JOB, DISPUTE_STATUS, isOpen, type DisputeChange } from "./store.ts";

export { DISPUTE_CHECK_JOB };
/** Asks the provider whether a payment it just approved was disputed ({ transactionId }): the sandbox's disputing card. */
export const DISPUTE_DISCOVER_JOB = "dispute.discover";

export const DISPUTE_STATUSES = ["needs_response", "under_review", "won", "lost"] as const satisfies readonly DisputeState[];

/** What evidence files may be: PDF, PNG or JPEG, told by their first bytes (never by their name), at most 5 MB. */
export const MAX_DISPUTE_FILE_BYTES = 5 * 1024 * 1024;
const FILE_TYPES: { contentType: string; magic: number[] }[] = [
  { contentType: "application/pdf", magic: [0x25, 0x50, 0x44, 0x46, 0x2d] },
  { contentType: "image/png", magic: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { contentType: "image/jpeg", magic: [0xff, 0xd8, 0xff] },
];
export const fileTypeOf = (bytes: Uint8Array): string | null => FILE_TYPES.find((t) => t.magic.every((b, i) => bytes[i] === b))?.contentType ?? null;

/** A reminder notice records an update at most this often (Paystack reminds every 4 hours; a redelivered notice is not a new reminder). */
const REMINDER_GAP_MS = 30 * 60_000;
/** After the deadline, the provider is asked this soon (its verdict on an unanswered dispute). */
const AFTER_DEADLINE_MS = 60_000;

export interface DisputeServiceDeps extends StatusMachineDeps {
  read?: Reader;
  channels: ChannelService;
  transactions: Pick<TransactionService, "paymentOnChannel" | "getWithChannel">;
  connectors: Connectors;
  logger: Logger;
  /** How often each open dispute is asked about (DISPUTE_CHECK_EVERY_MS). */
  checkEveryMs: number;
}

const requiredText = (max: number) =>
  z
    .string({ error: (issue) => (issue.input == null ? "is required to submit" : "must be text") })
    .transform((value, ctx) => {
      const text = value.trim();
      if (!text) return refuse(ctx, "is required to submit");
      if (text.length > max) return refuse(ctx, `must be at most ${max} characters`);
      return unsafeText(text) ? refuse(ctx, unsafeText(text)!) : text;
    });

/** The evidence as the API takes it; a draft may leave any field out, a submission needs the four Paystack requires. */
const evidenceFields = {
  customerName: optionalTextSchema(200),
  customerEmail: optionalTextSchema(254).refine((email) => email === null || /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email), "must be an e-mail address"),
  customerPhone: optionalTextSchema(30),
  serviceDetails: optionalTextSchema(5000),
  deliveryAddress: optionalTextSchema(500),
  deliveryDate: optionalTextSchema(10).refine((day) => day === null || (/^\d{4}-\d{2}-\d{2}$/.test(day) && !Number.isNaN(Date.parse(`${day}T00:00:00Z`))), "must be a date, YYYY-MM-DD"),
  uploadedFiles: z
    .array(z.string({ error: "must be file ids (df_...)" }).regex(/^df_[A-Za-z0-9_-]{1,60}$/, "must be file ids (df_...)"), { error: "must be a list of file ids (df_...)" })
    .max(10, "at most 10 files")
    .nullish()
    .transform((files) => [...new Set(files ?? [])]),
  submit: z.boolean({ error: "must be true (send it to the provider) or false (keep a draft)" }).nullish().transform((submit) => submit ?? false),
};
const evidenceInput = z.object(evidenceFields);
const submission = z.object({
  customerName: requiredText(200),
  customerEmail: requiredText(254),
  customerPhone: requiredText(30),
  serviceDetails: requiredText(5000),
});

export type EvidenceInput = Partial<z.input<typeof evidenceInput>>;

/** The list filters as callers give them. */
export interface DisputeListFilters {
  status?: string | null;
  /** The disputed transaction's reference or id. */
  transaction?: string | null;
  dateFrom?: string | null;
  dateTo?: string | null;
  /** The zone whose days those are (GraphQL resolves the merchant's). */
  timeZone?: string | null;
}

/** The evidence as stored and shown (snake_case, as /v1 shows it). */
function storedEvidence(e: z.output<typeof evidenceInput>) {
  return {
    customer_name: e.customerName,
    customer_email: e.customerEmail,
    customer_phone: e.customerPhone,
    service_details: e.serviceDetails,
    delivery_address: e.deliveryAddress,
    delivery_date: e.deliveryDate,
    uploaded_files: e.uploadedFiles,
  };
}

const messagesOf = (record: ProviderDispute) => record.messages.map((m) => ({ sender: m.sender, body: m.body, created_at: m.createdAt }));

/**
 * Disputes (chargebacks): a provider's record of a payer contesting a card payment, kept true in the gateway. A
 * provider's notice only names a dispute: the gateway asks the provider before changing anything, and asks about
 * every open dispute every DISPUTE_CHECK_EVERY_MS (and just after its deadline), so a lost notice still ends right.
 * Every change goes through the dispute's store, whose statements write the event and the ledger's entry with it.
 */
export function createDisputeService(deps: DisputeServiceDeps) {
  const { prisma, channels, connectors, logger } = deps;
  const reader = deps.read?.prisma ?? prisma;

  const connectorOf = (channel: PaymentChannel): DisputeConnector | undefined => connectors.for(channel)?.disputes;

  const paymentOf = (t: Transaction): DisputedPayment => ({
    reference: t.reference,
    amount: t.amount,
    currency: t.currency,
    providerReference: t.providerReference,
    completedAt: t.completedAt,
  });

  function queryOf(dispute: Dispute | null, providerReference: string, transaction: Transaction | null, channel: PaymentChannel): DisputeQuery {
    const evidence = dispute?.evidence as { service_details?: string | null } | null | undefined;
    return {
      config: channels.readChannelConfig(channel),
      providerReference,
      payment: transaction ? paymentOf(transaction) : null,
      submitted: dispute?.evidenceSubmittedAt ? { at: dispute.evidenceSubmittedAt, serviceDetails: evidence?.service_details ?? "" } : null,
      acceptedAt: dispute?.acceptedAt ?? null,
    };
  }

  /** A provider call about a dispute (or a payment that may be disputed), on record against the payment. */
  const about = <T>(t: Pick<Transaction, "merchantId" | "id">, call: () => Promise<T>) => withProviderCallScope({ merchantId: t.merchantId, transactionId: t.id }, call);

  /** When to ask next about an open dispute: at the usual interval, or just after its deadline when that comes first. */
  function nextCheckInMs(dispute: Dispute): number {
    const now = Date.now();
    if (dispute.status === "needs_response" && dispute.dueBy && dispute.dueBy.getTime() > now) {
      return Math.min(deps.checkEveryMs, dispute.dueBy.getTime() - now + AFTER_DEADLINE_MS);
    }
    return deps.checkEveryMs;
  }

  async function transition(dispute: Dispute, to: Exclude<DisputeState, "needs_response">, changes: Partial<Record<DisputeChange, string | null>>) {
    const result = await applyTransition(deps, DISPUTE_STATUS, { id: dispute.id, to, changes });
    if (result.applied) logger.info({ dispute: dispute.reference, status: to }, "dispute changed");
    return result.row;
  }

  /**
   * The provider's record of a dispute, applied: opened when the gateway did not know it (holding its amount), then
   * moved to the provider's status (won or lost releases or takes the hold), or, while it stays open, a new deadline,
   * message or reminder recorded as dispute.updated. Every step is guarded, so any number of notices at once apply it once.
   */
  async function applyRecord(channel: PaymentChannel, transaction: Transaction, record: ProviderDispute, options: { reminder?: boolean } = {}): Promise<Dispute | null> {
    let dispute = (await store.findByProvider(prisma, channel.id, record.providerReference)) as Dispute | null;
    if (!dispute) {
      const opened = await store.openDispute(
        prisma,
        {
          reference: randomReference("dp_"),
          transactionId: transaction.id,
          providerReference: record.providerReference,
          amount: record.amount,
          currency: record.currency,
          reason: record.reason,
          dueBy: record.dueBy,
          messages: messagesOf(record),
        },
        new Date(Date.now() + Math.min(deps.checkEveryMs, record.dueBy ? Math.max(0, record.dueBy.getTime() - Date.now()) + AFTER_DEADLINE_MS : deps.checkEveryMs)),
      );
      if ("refused" in opened) {
        logger.warn({ channelId: channel.id, reference: transaction.reference, providerReference: record.providerReference }, "dispute of a payment that is not completed; not recorded");
        return null;
      }
      if (opened.created) {
        logger.info({ dispute: opened.dispute.reference, reference: transaction.reference, amount: String(opened.dispute.amount) }, "dispute opened");
        afterCommit(deps, opened.event, opened.deliveriesQueued + 1);
      }
      dispute = opened.dispute;
    }
    if (!isOpen(dispute.status)) return dispute;
    const messages = messagesOf(record);
    if (record.state === "won" || record.state === "lost") {
      return transition(dispute, record.state, { fee: String(record.fee), messages: JSON.stringify(messages), ...(record.dueBy ? { dueBy: record.dueBy.toISOString() } : {}) });
    }
    if (record.state === "under_review" && dispute.status === "needs_response") {
      // Answered elsewhere (the provider's own dashboard): under review all the same.
      return transition(dispute, "under_review", { messages: JSON.stringify(messages) });
    }
    const known = Array.isArray(dispute.messages) ? dispute.messages.length : 0;
    const newDeadline = (record.dueBy?.getTime() ?? null) !== (dispute.dueBy?.getTime() ?? null);
    const reminded = options.reminder === true && Date.now() - dispute.updatedAt.getTime() >= REMINDER_GAP_MS;
    if (messages.length > known || newDeadline || reminded) {
      const updated = await store.recordUpdate(prisma, dispute, { dueBy: record.dueBy ?? dispute.dueBy, messages: messages.length >= known ? messages : (dispute.messages as unknown[]) });
      if (updated) {
        afterCommit(deps, updated.event, updated.deliveriesQueued);
        return updated.dispute;
      }
    }
    return dispute;
  }

  type KnownDispute = NonNullable<Awaited<ReturnType<typeof store.findWithPayment>>>;

  /** The provider's record of a dispute the gateway knows, asked on record against its payment. */
  const askAbout = (dispute: KnownDispute, connector: DisputeConnector) =>
    about(dispute.transaction, () => connector.fetch(queryOf(dispute, dispute.providerReference, dispute.transaction, dispute.channel)));

  /** Asks the provider about a dispute the gateway knows, and applies its answer. */
  async function refresh(disputeId: number, options: { reminder?: boolean } = {}): Promise<Dispute | null> {
    const dispute = await store.findWithPayment(prisma, disputeId);
    if (!dispute) return null;
    const connector = connectorOf(dispute.channel);
    if (!connector || !isOpen(dispute.status)) return dispute;
    const record = await askAbout(dispute, connector);
    return applyRecord(dispute.channel, dispute.transaction, record, options);
  }

  const checkJob: JobDefinition<{ disputeId: number }> = {
    kind: DISPUTE_CHECK_JOB,
    concurrency: 5,
    async run({ disputeId }) {
      let dispute: Dispute | null;
      try {
        dispute = await refresh(Number(disputeId));
      } catch (error) {
        logger.warn({ disputeId, err: (error as Error).message }, "dispute status query failed; will ask again");
        return { retryInMs: Math.min(deps.checkEveryMs, 60_000) };
      }
      return dispute && isOpen(dispute.status) ? { retryInMs: nextCheckInMs(dispute) } : undefined;
    },
  };
  deps.jobs.register(checkJob);

  /** The sandbox's disputing card: asks, at the time it says, whether the payment was disputed; a few more times if not yet. */
  const discoverJob: JobDefinition<{ transactionId: number; reference: string; channelId: number }> = {
    kind: DISPUTE_DISCOVER_JOB,
    maxAttempts: 5,
    async run({ reference, channelId }, job) {
      const transaction = await deps.transactions.paymentOnChannel(reference, Number(channelId));
      const connector = transaction?.channel ? connectorOf(transaction.channel) : undefined;
      if (!transaction?.channel || !connector?.ofPayment) return;
      const ofPayment = connector.ofPayment.bind(connector);
      const record = await about(transaction, () => ofPayment({ config: channels.readChannelConfig(transaction.channel!), payment: paymentOf(transaction) }));
      if (record) {
        await applyRecord(transaction.channel, transaction, record);
        return;
      }
      return job.attempt < 5 ? { retryInMs: 1000 * job.attempt } : undefined;
    },
  };
  deps.jobs.register(discoverJob);

  /** The filters as the store takes them; null when the transaction named is none of the caller's (nothing matches). */
  async function filtersOf(principal: Principal, input: DisputeListFilters): Promise<store.DisputeFilters | null> {
    if (input.status && !(DISPUTE_STATUSES as readonly string[]).includes(input.status)) {
      throw new ValidationError("status", `must be one of ${DISPUTE_STATUSES.join(", ")}`);
    }
    let transactionId: number | null = null;
    if (input.transaction) {
      const t = await deps.transactions.getWithChannel(principal, input.transaction).catch((error: unknown) => {
        if (error instanceof NotFoundError) return null;
        throw error;
      });
      if (!t) return null;
      transactionId = t.id;
    }
    return { status: (input.status as DisputeState | null | undefined) ?? null, transactionId, dateFrom: input.dateFrom ?? null, dateTo: input.dateTo ?? null, timeZone: input.timeZone ?? null };
  }

  /**
   * The provider's messages once it has the merchant's answer (Paystack keeps the answer's message among them), kept with
   * the change, so the next check does not take the merchant's own words for news. None when the provider cannot say now.
   */
  async function messagesAfterAnswer(dispute: KnownDispute, connector: DisputeConnector): Promise<{ messages?: string }> {
    try {
      const record = await askAbout(dispute, connector);
      return { messages: JSON.stringify(messagesOf(record)) };
    } catch (error) {
      logger.warn({ dispute: dispute.reference, err: (error as Error).message }, "dispute not asked about after the answer; its next check will");
      return {};
    }
  }

  const noticesInFlight = new Map<string, Promise<Dispute | null>>();

  async function applyNotice(channel: PaymentChannel, notice: { providerReference: string; event: string }): Promise<Dispute | null> {
    const connector = connectorOf(channel);
    if (!connector) return null;
    const reminder = /remind/.test(notice.event);
    const known = await store.findByProvider(prisma, channel.id, notice.providerReference);
    if (known) return refresh(known.id, { reminder });
    const record = await withProviderCallScope({ merchantId: channel.merchantId }, () => connector.fetch(queryOf(null, notice.providerReference, null, channel)));
    const transaction = record.paymentReference ? await deps.transactions.paymentOnChannel(record.paymentReference, channel.id) : null;
    if (!transaction) {
      logger.warn({ channelId: channel.id, providerReference: notice.providerReference }, "dispute notice for a payment the gateway does not know; not recorded");
      return null;
    }
    return applyRecord(channel, transaction, record, { reminder });
  }

  /** An open dispute of the caller's, answerable now: its deadline not passed. */
  async function answerable(principal: Principal, reference: string) {
    const found = await store.findScoped(prisma, principal, reference);
    if (!found) throw new NotFoundError("Dispute");
    const dispute = await store.findWithPayment(prisma, found.id);
    if (!dispute) throw new NotFoundError("Dispute");
    if (dispute.status !== "needs_response") {
      throw new GatewayError("dispute_closed", `Dispute ${reference} is ${dispute.status}: ${dispute.status === "under_review" ? "its evidence was submitted already" : "it is closed"}`);
    }
    if (dispute.dueBy && dispute.dueBy.getTime() <= Date.now()) {
      throw new GatewayError("dispute_closed", `Dispute ${reference} was due by ${dispute.dueBy.toISOString()}: it can no longer be answered`);
    }
    const connector = connectorOf(dispute.channel);
    if (!connector) throw new GatewayError("dispute_closed", `Dispute ${reference}: its provider takes no answers through the gateway`);
    return { dispute, connector };
  }

  return {
    checkJob,
    discoverJob,

    /**
     * The jobs a completed payment starts: asking whether it was disputed, when its provider says a dispute will open
     * (the sandbox's disputing card). For the payment's status change, which queues them with itself.
     */
    jobsOnCompleted(channel: PaymentChannel, payment: { reference: string; amount: bigint; currency: string; providerReference: string | null }) {
      const opensAfterMs = connectorOf(channel)?.opensAfterMs?.({ ...payment, completedAt: new Date() });
      if (opensAfterMs == null) return [];
      return [{ kind: DISPUTE_DISCOVER_JOB, payload: { reference: payment.reference, channelId: channel.id }, runAt: new Date(Date.now() + opensAfterMs + 250) }];
    },

    /**
     * A provider's signed notice of a dispute (Paystack's charge.dispute.*): the provider is asked, then its answer applied.
     * Copies of a notice arriving together in this process share one question (a burst of redeliveries asks once).
     */
    onNotice(channel: PaymentChannel, notice: { providerReference: string; event: string }): Promise<Dispute | null> {
      const key = `${channel.id}:${notice.providerReference}:${notice.event}`;
      let asking = noticesInFlight.get(key);
      if (!asking) {
        asking = applyNotice(channel, notice).finally(() => noticesInFlight.delete(key));
        noticesInFlight.set(key, asking);
      }
      return asking;
    },

    /** The provider's dispute of one payment, if any, applied (a reconciliation's finding): null when there is none. */
    async findForPayment(transaction: Transaction & { channel: PaymentChannel }): Promise<Dispute | null> {
      const connector = connectorOf(transaction.channel);
      if (!connector?.ofPayment) return null;
      const ofPayment = connector.ofPayment.bind(connector);
      const record = await about(transaction, () => ofPayment({ config: channels.readChannelConfig(transaction.channel), payment: paymentOf(transaction) }));
      return record ? applyRecord(transaction.channel, transaction, record) : null;
    },

    async get(principal: Principal, reference: string): Promise<Dispute> {
      const dispute = await store.findScoped(reader, principal, reference.trim());
      if (!dispute) throw new NotFoundError("Dispute");
      return dispute;
    },

    /** Open disputes first, soonest deadline first, then the closed ones newest first (the Disputes page's order). */
    ...filteredList<Dispute, DisputeListFilters, store.DisputeFilters>(filtersOf, {
      page: (principal, filters, paging, query) => store.listPage(reader, principal, filters, paging, query),
      slice: (principal, filters, query) => store.connectionSlice(reader, principal, filters, query),
      count: (principal, filters) => store.count(reader, principal, filters),
    }),

    ofTransaction: (transactionId: number) => store.ofTransaction(reader, transactionId),
    filesOf: (disputeId: number) => store.filesOf(reader, disputeId),

    /**
     * The merchant's evidence: kept as a draft, or (submit) sent to the provider, which contests the dispute there, and
     * the dispute goes under review. Only before the deadline, and only once.
     */
    async submitEvidence(principal: Principal, reference: string, input: EvidenceInput): Promise<Dispute> {
      const evidence = parseInput(evidenceInput, input);
      const { dispute, connector } = await answerable(principal, reference);
      const files = evidence.uploadedFiles.length ? await store.filesOf(prisma, dispute.id, evidence.uploadedFiles) : [];
      const missing = evidence.uploadedFiles.filter((id) => !files.some((f) => f.reference === id));
      if (missing.length) throw new ValidationError("uploaded_files", `${missing.join(", ")}: no such file of this dispute (upload it to /v1/disputes/${reference}/files first)`);
      const stored = storedEvidence(evidence);
      if (!evidence.submit) {
        const saved = await store.saveDraft(prisma, dispute.id, stored as Prisma.InputJsonValue);
        if (!saved) throw new GatewayError("dispute_closed", `Dispute ${reference} is no longer awaiting an answer`);
        return saved;
      }
      const required = parseInput(submission, evidence);
      const answer: DisputeEvidence = { ...required, deliveryAddress: evidence.deliveryAddress, deliveryDate: evidence.deliveryDate };
      const submittedAt = new Date();
      // Recorded first: a check that meanwhile finds it under review at the provider keeps the evidence, and a second
      // submission at once is refused rather than sent twice.
      if (!(await store.markSubmitted(prisma, dispute.id, stored as Prisma.InputJsonValue, submittedAt))) {
        throw new GatewayError("dispute_closed", `Dispute ${reference}: its evidence was submitted already`);
      }
      try {
        await about(dispute.transaction, () =>
          connector.contest({
            ...queryOf({ ...dispute, evidence: stored as Prisma.JsonValue, evidenceSubmittedAt: submittedAt }, dispute.providerReference, dispute.transaction, dispute.channel),
            evidence: answer,
            files: files.map((f) => f.providerFileName).filter((name): name is string => name !== null),
            amount: dispute.amount,
            message: "The merchant contests this dispute with the evidence submitted.",
          }),
        );
      } catch (error) {
        await store.unmarkSubmitted(prisma, dispute.id);
        throw error;
      }
      const messages = await messagesAfterAnswer({ ...dispute, evidence: stored as Prisma.JsonValue, evidenceSubmittedAt: submittedAt }, connector);
      const row = await transition(dispute, "under_review", { evidence: JSON.stringify(stored), evidenceSubmittedAt: submittedAt.toISOString(), ...messages });
      // A provider that decides soon (the sandbox) is asked then, not at the usual interval.
      if (connector.decidesAfterMs !== undefined) {
        await reschedule(prisma, DISPUTE_CHECK_JOB, { disputeId: dispute.id }, new Date(submittedAt.getTime() + connector.decidesAfterMs + 250));
        deps.jobs.nudge();
      }
      return row;
    },

    /** The merchant accepts the loss: the provider refunds the payer, and the hold becomes final. */
    async accept(principal: Principal, reference: string): Promise<Dispute> {
      const { dispute, connector } = await answerable(principal, reference);
      const acceptedAt = new Date();
      await about(dispute.transaction, () =>
        connector.accept({
          ...queryOf(dispute, dispute.providerReference, dispute.transaction, dispute.channel),
          amount: dispute.amount,
          message: "The merchant accepts this dispute.",
        }),
      );
      return transition(dispute, "lost", { acceptedAt: acceptedAt.toISOString(), ...(await messagesAfterAnswer({ ...dispute, acceptedAt }, connector)) });
    },

    /** One evidence file, stored for the merchant and handed to the provider; its id is named in the evidence. */
    async uploadFile(principal: Principal, reference: string, file: { name: string; bytes: Buffer }) {
      const name = file.name.replace(/^.*[\\/]/, "").trim().slice(0, 120);
      if (!name || unsafeText(name)) throw new ValidationError("file", "must have a file name of printable characters");
      if (file.bytes.length === 0) throw new ValidationError("file", "is empty");
      if (file.bytes.length > MAX_DISPUTE_FILE_BYTES) throw new ValidationError("file", `must be at most 5 MB (${MAX_DISPUTE_FILE_BYTES} bytes)`);
      const contentType = fileTypeOf(file.bytes);
      if (!contentType) throw new ValidationError("file", "must be a PDF, PNG or JPEG file (told by its content, not its name)");
      const { dispute, connector } = await answerable(principal, reference);
      const uploaded = await about(dispute.transaction, () =>
        connector.uploadFile({ config: channels.readChannelConfig(dispute.channel), providerReference: dispute.providerReference, fileName: name, contentType, bytes: file.bytes }),
      );
      const row = await store.insertFile(prisma, {
        reference: randomReference("df_"),
        disputeId: dispute.id,
        merchantId: dispute.merchantId,
        mode: dispute.mode,
        name,
        size: file.bytes.length,
        contentType,
        content: new Uint8Array(file.bytes),
        providerFileName: uploaded.providerFileName,
      });
      return { reference: row.reference, name: row.name, size: row.size, contentType: row.contentType, createdAt: row.createdAt };
    },

    /** Asks the provider about an open dispute now (the CLI, a test). */
    refresh,
    enqueueCheck: (disputeId: number) => enqueue(prisma, DISPUTE_CHECK_JOB, { disputeId }),
  };
}

export type DisputeService = ReturnType<typeof createDisputeService>;
