import { randomBytes } from "node:crypto";
import { scopeOf, type Principal } from "../../auth.ts";
import type { Db, PrismaClient } from "../../db/database.ts";
import type { MailMessage, Prisma } from "../../db/generated/prisma/client.ts";
import { enqueueCte, enqueue } from "../../jobs/store.ts";

/**
 * Every statement on mail_messages and receipts. A message is written in the same statement as the event that
 * calls for it (the fan-out below, beside the webhooks'), unique on its key, with its `mail.send` job: a payment
 * completed once is one receipt, whatever the retries, the instances or a crash.
 */

export const MAIL_SEND_JOB = "mail.send";

/**
 * Which events call for which message: to the payer (resolved when sent: the payment's e-mail) or to each of the
 * merchant's team who wants it. A dispute.updated is a reminder only while the merchant's answer is awaited.
 */
const EVENT_MAIL = `(VALUES
  ('transaction.completed', 'payment_receipt', true), ('refund.completed', 'refund_receipt', true),
  ('invoice.created', 'invoice', true), ('invoice.payment_failed', 'invoice_payment_failed', true),
  ('payout.failed', 'payout_failed', false), ('refund.failed', 'refund_failed', false),
  ('dispute.created', 'dispute_opened', false), ('dispute.updated', 'dispute_reminder', false)
) AS m(type, kind, to_payer)`;

/**
 * The team members a notice of `kind` (an expression) goes to, as a join condition on `users u` for merchant `m`
 * and mode `mode`: active owners, and developers in test mode, unless they opted out of the kind.
 */
const RECIPIENTS = (merchant: string, mode: string, kind: string) =>
  `u.merchant_id = ${merchant} AND u.disabled_at IS NULL AND (u.role = 'owner' OR (u.role = 'developer' AND ${mode} = 'test'))
    AND NOT (${kind} = ANY(coalesce(u.mail_opt_outs, '{}')))`;

/**
 * The mail fan-out as CTEs over a CTE named `ev` (id, merchant_id, mode, type, payload) of the events just
 * recorded: one message per payer receipt (only when the payment has an e-mail and the merchant sends receipts)
 * and per team member for a notice, each with its job. `mail_jobs` has a row per message queued. An event that
 * calls for no message costs a join on a constant list.
 */
export const MAIL_FAN_OUT_CTES = `mail_wanted AS (
  SELECT ev.id AS event_id, ev.merchant_id, ev.mode, m.kind, m.to_payer,
    CASE WHEN ev.type = 'transaction.completed' THEN (ev.payload #>> '{transaction,id}')::int END AS transaction_id
  FROM ev JOIN ${EVENT_MAIL} ON m.type = ev.type
  WHERE (m.kind <> 'dispute_reminder' OR ev.payload #>> '{dispute,status}' = 'needs_response')
    AND (m.kind <> 'payment_receipt' OR coalesce(ev.payload #>> '{transaction,email}', '') <> '')
), mail_rows AS (
  INSERT INTO mail_messages (merchant_id, mode, kind, key, event_id, transaction_id, user_id)
  SELECT w.merchant_id, w.mode, w.kind, w.event_id || ':' || w.kind, w.event_id, w.transaction_id, NULL FROM mail_wanted w
  LEFT JOIN merchant_brands b ON b.merchant_id = w.merchant_id
  WHERE w.to_payer AND coalesce(b.receipts_enabled, true)
  UNION ALL
  SELECT w.merchant_id, w.mode, w.kind, w.event_id || ':' || w.kind || ':' || u.id, w.event_id, NULL, u.id FROM mail_wanted w
  JOIN users u ON ${RECIPIENTS("w.merchant_id", "w.mode", "w.kind")}
  WHERE NOT w.to_payer
  ON CONFLICT (key) DO NOTHING
  RETURNING id
), ${enqueueCte("mail_jobs", MAIL_SEND_JOB, { from: "mail_rows", payload: { messageId: "id" } })}`;

// ---- Messages written outside an event's statement ----

export interface NewMessage {
  merchantId: number;
  mode: "test" | "live";
  kind: string;
  key: string;
  transactionId?: number | null;
  userId?: number | null;
  toAddress?: string | null;
  facts?: Prisma.InputJsonValue;
}

/**
 * Messages and their jobs in the caller's transaction, skipping any whose key is already there (the same notice
 * again). Returns how many were queued.
 */
export async function insertMessages(tx: Prisma.TransactionClient, messages: NewMessage[]): Promise<number> {
  let queued = 0;
  for (const message of messages) {
    const rows = await tx.$queryRawUnsafe<{ id: number }[]>(
      `INSERT INTO mail_messages (merchant_id, mode, kind, key, transaction_id, user_id, to_address, facts)
       VALUES ($1, $2::"Mode", $3, $4, $5, $6, $7, $8::jsonb) ON CONFLICT (key) DO NOTHING RETURNING id`,
      message.merchantId,
      message.mode,
      message.kind,
      message.key,
      message.transactionId ?? null,
      message.userId ?? null,
      message.toAddress ?? null,
      message.facts === undefined ? null : JSON.stringify(message.facts),
    );
    for (const row of rows) {
      await enqueue(tx, MAIL_SEND_JOB, { messageId: row.id });
      queued++;
    }
  }
  return queued;
}

/** A notice of `kind` to every team member of the merchant who wants it (webhook endpoint disabled, daily summary). */
export async function insertNotices(tx: Prisma.TransactionClient, notice: { merchantId: number; mode: "test" | "live"; kind: string; keyPrefix: string; facts: Prisma.InputJsonValue }): Promise<number> {
  const users = await tx.$queryRawUnsafe<{ id: number }[]>(
    `SELECT u.id FROM users u WHERE ${RECIPIENTS("$1", "$2", "$3")} ORDER BY u.id`,
    notice.merchantId,
    notice.mode,
    notice.kind,
  );
  return insertMessages(
    tx,
    users.map((u) => ({ merchantId: notice.merchantId, mode: notice.mode, kind: notice.kind, key: `${notice.keyPrefix}:${u.id}`, userId: u.id, facts: notice.facts })),
  );
}

/**
 * Whether a notice of insertNotices' `keyPrefix` was queued for any of the merchant's users: exact keys
 * (`<keyPrefix>:<userId>`) on the key's unique index, where a LIKE prefix would read the whole table (the
 * default collation's index does not serve it). Every user, not only today's recipients, as a prefix would match.
 */
export async function noticeQueued(db: Db, merchantId: number, keyPrefix: string): Promise<boolean> {
  const users = await db.user.findMany({ where: { merchantId }, select: { id: true } });
  if (users.length === 0) return false;
  const found = await db.mailMessage.findFirst({ where: { key: { in: users.map((u) => `${keyPrefix}:${u.id}`) } }, select: { id: true } });
  return found !== null;
}

// ---- The send job's reads and writes ----

export const findMessages = (db: Db, ids: number[]) => db.mailMessage.findMany({ where: { id: { in: ids } } });

/** The rendered message, before it is handed to the transport: a retry sends the same text. */
export async function recordRendered(db: Db, id: number, rendered: RenderedFields): Promise<void> {
  await db.mailMessage.update({ where: { id }, data: rendered });
}

export type RenderedFields = { toAddress: string; language: string; subject: string; textBody: string; htmlBody: string };

export type MailOutcome = { status: "sent" | "kept" | "skipped" | "failed" | "queued"; error?: string | null };

/** One message's try, as recordOutcomes writes it. */
export interface OutcomeWrite {
  id: number;
  outcome: MailOutcome;
  /** The rendered message, when it was rendered on this try and never handed to a transport (one write, not two). */
  rendered?: RenderedFields;
}

/**
 * The outcomes of a batch's tries in one statement: sent, kept (the test inbox), skipped or failed for good, or queued
 * again with its error; each with its rendered message when given (else the row's is kept).
 */
export async function recordOutcomes(db: Db, writes: OutcomeWrite[]): Promise<void> {
  if (!writes.length) return;
  const column = <T>(pick: (w: OutcomeWrite) => T) => writes.map(pick);
  await db.$executeRawUnsafe(
    `UPDATE mail_messages m SET status = r.status, last_error = r.last_error, attempts = m.attempts + r.tried,
       sent_at = CASE WHEN r.status IN ('sent', 'kept') THEN now() ELSE m.sent_at END,
       to_address = coalesce(r.to_address, m.to_address), language = coalesce(r.language, m.language),
       subject = coalesce(r.subject, m.subject), text_body = coalesce(r.text_body, m.text_body), html_body = coalesce(r.html_body, m.html_body)
     FROM unnest($1::int[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
       AS r(id, status, last_error, tried, to_address, language, subject, text_body, html_body)
     WHERE m.id = r.id`,
    column((w) => w.id),
    column((w) => w.outcome.status),
    column((w) => w.outcome.error ?? null),
    column((w) => (w.outcome.status === "skipped" ? 0 : 1)),
    column((w) => w.rendered?.toAddress ?? null),
    column((w) => w.rendered?.language ?? null),
    column((w) => w.rendered?.subject ?? null),
    column((w) => w.rendered?.textBody ?? null),
    column((w) => w.rendered?.htmlBody ?? null),
  );
}

// ---- Lists (the test inbox, a payment's messages) ----

export function listMessages(db: Db, principal: Principal, options: { status?: string; transactionId?: number; take: number; skip: number }) {
  const where: Prisma.MailMessageWhereInput = {
    ...scopeOf(principal),
    ...(options.status ? { status: options.status } : {}),
    ...(options.transactionId !== undefined ? { transactionId: options.transactionId } : {}),
  };
  return Promise.all([db.mailMessage.findMany({ where, orderBy: [{ createdAt: "desc" }, { id: "desc" }], take: options.take, skip: options.skip }), db.mailMessage.count({ where })]);
}

export function findScopedMessage(db: Db, principal: Principal, id: number): Promise<MailMessage | null> {
  return db.mailMessage.findFirst({ where: { id, ...scopeOf(principal) } });
}

// ---- Retention ----

/** Messages done with (anything but queued) created more than `olderThanMs` ago, at most `limit` of them. */
export function deleteFinishedMessagesBatch(prisma: PrismaClient, olderThanMs: number, limit: number): Promise<number> {
  return prisma.$executeRaw`
    DELETE FROM mail_messages WHERE id IN (
      SELECT id FROM mail_messages
      WHERE created_at < now() - make_interval(secs => ${olderThanMs / 1000}::double precision) AND status <> 'queued'
      LIMIT ${limit} FOR UPDATE SKIP LOCKED
    )`;
}

// ---- Receipts ----

/** The payment's receipt token, made the first time it is asked for (128 random bits, base64url). */
export async function receiptToken(db: PrismaClient, transaction: { id: number; merchantId: number }): Promise<string> {
  return (await receiptTokens(db, [transaction])).get(transaction.id)!;
}

/** Receipt tokens for many payments in one statement (a batch of receipts), each made if new: by payment id. */
export async function receiptTokens(db: PrismaClient, transactions: { id: number; merchantId: number }[]): Promise<Map<number, string>> {
  // One row per payment, in id order: ON CONFLICT may not touch a row twice, and concurrent batches lock in one order.
  const unique = [...new Map(transactions.map((t) => [t.id, t])).values()].sort((a, b) => a.id - b.id);
  if (unique.length === 0) return new Map();
  const rows = await db.$queryRawUnsafe<{ transaction_id: number; token: string }[]>(
    `INSERT INTO receipts (token, transaction_id, merchant_id)
     SELECT * FROM unnest($1::text[], $2::int[], $3::int[])
     ON CONFLICT (transaction_id) DO UPDATE SET token = receipts.token RETURNING transaction_id, token`,
    unique.map(() => randomBytes(16).toString("base64url")),
    unique.map((t) => t.id),
    unique.map((t) => t.merchantId),
  );
  return new Map(rows.map((r) => [r.transaction_id, r.token]));
}

/** The payloads of these events, by id, in one statement. */
export async function eventPayloads(db: PrismaClient, ids: bigint[]): Promise<Map<bigint, Record<string, unknown> | null>> {
  if (ids.length === 0) return new Map();
  const events = await db.event.findMany({ where: { id: { in: [...new Set(ids)] } }, select: { id: true, payload: true } });
  return new Map(events.map((e) => [e.id, (e.payload as Record<string, unknown> | null) ?? null]));
}

export const findReceipt = (db: Db, token: string) => db.receipt.findUnique({ where: { token } });
