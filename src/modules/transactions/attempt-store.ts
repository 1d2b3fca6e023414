import type { PrismaClient, Sql } from "../../db/database.ts";
import type { Prisma, TransactionAttempt } from "../../db/generated/prisma/client.ts";
import { attemptGuard, type AttemptStatus, type SettledAttemptStatus } from "../events/status-rules.ts";
import type { BatchLeadWrite } from "../events/status-machine.ts";
import { claimStatement, paymentAmountOf, paymentOfMerchantBesides, releaseClaimText } from "./store.ts";

/**
 * Every statement on `transaction_attempts`, behind named functions: the one place that reads or writes a payer's
 * attempts (every provider call that may move a payer's money: a card charge, an STK push from the page or the API,
 * a payment the provider reports on its own, M-Pesa C2B).
 * The status an attempt may settle to is the one status machine's attempt rule (events/status-rules.ts).
 */

/** How an attempt's method is shown (the page, GraphQL, webhooks); the payment's own method is card | momo_stk. */
export type AttemptMethod = "card" | "mpesa";
export type { AttemptStatus, SettledAttemptStatus };
/**
 * Where the payer was asked from: the hosted checkout page (retries, shown in the settling event), the API, or
 * nowhere: the payer paid on their own and the provider reported it (C2B, a paybill or till payment).
 */
export type AttemptOrigin = "checkout" | "api" | "c2b";

/** The attempt's method for a payment method (what the payment records once the attempt settles it), and back. */
export const PUSH_METHOD: AttemptMethod = "mpesa";
/**
 * A payment the provider reports on its own is mobile money's attempt too (its payment's method stays momo_c2b), and
 * the report is its verdict: it is born settled, succeeded, which the attempt rule lets nothing change afterwards.
 */
const REPORTED_METHOD: AttemptMethod = "mpesa";
const REPORTED_STATUS: SettledAttemptStatus = "succeeded";
export const paymentMethodOf = (method: AttemptMethod) => (method === "card" ? "card" : "momo_stk");

export interface NewAttempt {
  method: AttemptMethod;
  detail: string | null;
  channelId?: number;
  phoneNumber?: string;
  /** The checkout page's language (en | sw): the payer's receipt is written in it. */
  language?: string | undefined;
  /** A card's network (Visa, Mastercard ...), for the payer's receipt. */
  cardBrand?: string | null | undefined;
}

/** A provider's verdict on one attempt, as the attempt records it. */
export interface AttemptVerdict {
  attemptId: number;
  status: SettledAttemptStatus;
  code?: string | null;
  reason?: string | null;
  providerReference?: string | null;
}

/** An attempt with what it asked the provider for: its payment's amount, in minor units. */
export type PayerAttempt = TransactionAttempt & { amount: bigint };

const ATTEMPT_COLUMNS = `a.id, a.transaction_id AS "transactionId", a.method, a.origin, ${paymentAmountOf("a")}::text AS amount, a.status, a.code, a.reason,
  a.detail, a.channel_id AS "channelId", a.phone_number AS "phoneNumber", a.checkout_request_id AS "checkoutRequestId", a.send_claim AS "sendClaim",
  a.provider_reference AS "providerReference", a.created_at AS "createdAt", a.settled_at AS "settledAt"`;
type AttemptRow = TransactionAttempt & { amount: string };
const fromRow = (row: AttemptRow): PayerAttempt => ({ ...row, amount: BigInt(row.amount) });

/** A push from the page holds its payment's claim while pending: its created_at is the claim's token. */
const PUSH_HOLDS_CLAIM = `EXISTS (SELECT 1 FROM transaction_attempts a WHERE a.transaction_id = t.id AND a.method = '${PUSH_METHOD}' AND a.status = 'pending' AND a.created_at = t.charge_started_at)`;

/** $5 null: the claim only (the expiry sweep), no attempt row. */
const CLAIM_FOR_ATTEMPT = claimStatement({
  heldByPush: PUSH_HOLDS_CLAIM,
  insertAttempt: `attempt AS (
    INSERT INTO transaction_attempts (transaction_id, method, origin, detail, channel_id, phone_number, language, card_brand, created_at)
    SELECT id, $5::text, 'checkout', $6::text, $7::int, $8::text, $9::text, $10::text, $2 FROM claimed WHERE $5::text IS NOT NULL
    RETURNING id
  )`,
});

/** Another payment of the merchant with a page push to this number still in its lifetime (pending_push_by_phone index). */
const PENDING_PUSH_TO_PHONE = `SELECT 1 AS found FROM transaction_attempts a
  WHERE a.phone_number = $1 AND a.method = '${PUSH_METHOD}' AND a.status = 'pending' AND a.origin = 'checkout' AND a.created_at >= $2
    AND ${paymentOfMerchantBesides("a", "$3", "$4")}
  LIMIT 1`;

/** An attempt's verdict, written once (the attempt rule's guard): the UPDATE a transition's lead (settleAttemptCte) and settleFailed build on. */
const settleText = (to: SettledAttemptStatus, id: string, values: [string, string, string]) =>
  `UPDATE transaction_attempts SET status = '${to}', code = ${values[0]}, reason = ${values[1]}, provider_reference = COALESCE(${values[2]}, provider_reference), settled_at = now()
  WHERE id = ${id} AND status IN (${attemptGuard(to).map((s) => `'${s}'`).join(", ")})
  RETURNING *`;

const verdictValues = (v: AttemptVerdict) => [v.code ?? null, v.reason?.slice(0, 500) ?? null, v.providerReference ?? null];

const BY_ID = `SELECT ${ATTEMPT_COLUMNS} FROM transaction_attempts a WHERE a.id = $1`;
const BY_REQUEST = `SELECT ${ATTEMPT_COLUMNS} FROM transaction_attempts a WHERE a.channel_id = $1 AND a.checkout_request_id = $2`;
const LATEST_PENDING = `SELECT ${ATTEMPT_COLUMNS} FROM transaction_attempts a WHERE a.transaction_id = $1 AND a.status = 'pending' ORDER BY a.id DESC LIMIT 1`;
/** A keyed API push's send_claim until a request takes the sending on. */
export const UNSENT_CLAIM = "unsent";
const TAKE_SENDING = `UPDATE transaction_attempts SET send_claim = $2 WHERE id = $1 AND status = 'pending' AND send_claim IN ('${UNSENT_CLAIM}', $2) RETURNING id`;
/**
 * A failed verdict and, below the payment's attempts limit ($5), the release of the claim the attempt took (its
 * created_at is the claim's token), in one statement: a payer who sees the failure can try again at once. The count
 * reads the statement's snapshot, where this attempt is still pending: hence the + 1. No row: already settled.
 */
const SETTLE_FAILED = `WITH settled AS (${settleText("failed", "$1", ["$2", "$3", "$4"])}),
  failed AS (
    SELECT s.transaction_id, s.created_at, (SELECT count(*)::int FROM transaction_attempts a WHERE a.transaction_id = s.transaction_id AND a.status = 'failed') + 1 AS n
    FROM settled s
  ),
  released AS (
    ${releaseClaimText("t.id = f.transaction_id AND t.charge_started_at = f.created_at AND f.n < $5", "failed f")}
  )
  SELECT n AS failed FROM failed`;

/**
 * A card charge that ended with no outcome (the provider unavailable): its attempt goes, as if never made, and the
 * claim it took ($3, its token) is released, in one statement: the page never shows the payment free while the
 * attempt still stands, or the attempt gone while the claim still refuses the payer.
 */
const FORGET_AND_RELEASE = `WITH forgotten AS (DELETE FROM transaction_attempts WHERE id = $1 AND status = 'pending' RETURNING id)
  ${releaseClaimText("t.id = $2 AND t.charge_started_at = $3")}`;

type Claimed = { claimed: boolean; status: string; attemptId: number | null };

/**
 * For the payment's settling event (transactions/status.ts): the page attempt that settled the payment `t` as
 * JSON ({attempt: {method, code, reason, number}}), or {} (API pushes, C2B). `settled` names a CTE of attempt
 * rows settled in the same statement, which the table does not show yet.
 */
export function settlingAttemptJson(t: string, settled?: string): string {
  const attempts = settled ? `(SELECT * FROM ${settled} UNION ALL SELECT * FROM transaction_attempts x WHERE x.id NOT IN (SELECT id FROM ${settled}))` : "transaction_attempts";
  return `COALESCE((
    SELECT jsonb_build_object('attempt', jsonb_build_object('method', a.method, 'code', a.code, 'reason', a.reason,
      'number', (SELECT count(*) FROM transaction_attempts b WHERE b.transaction_id = a.transaction_id AND b.id <= a.id)))
    FROM ${attempts} a
    WHERE a.transaction_id = ${t}.id AND a.origin = 'checkout'
      AND CASE WHEN ${t}.status::text = 'completed' THEN a.status = 'succeeded' ELSE a.status = 'failed' AND a.code IS NOT DISTINCT FROM ${t}.failure_code END
    ORDER BY a.id DESC LIMIT 1), '{}'::jsonb)`;
}

/**
 * The attempt's verdict as a CTE (`name`) of the payment's status change (events/status-machine.ts), whose
 * parameters start at `first`: the payment changes only when the attempt did, in one statement.
 */
/**
 * The pending API card attempt of each payment in the CTE `payments` (insertInvoiceChargesCte's rows), its detail
 * from the row of the CTE `input` with the same reference, as a data-modifying CTE `name` returning id, transaction_id.
 */
export function insertApiChargeAttemptsCte(name: string, payments: string, input: string): string {
  for (const identifier of [name, payments, input]) if (!/^[a-z_][a-z0-9_]*$/.test(identifier)) throw new Error(`not a plain SQL identifier: ${identifier}`);
  return `${name} AS (
    INSERT INTO transaction_attempts (transaction_id, method, origin, status, detail, channel_id, created_at)
    SELECT p.id, 'card', 'api', 'pending', i.detail, p.channel_id, p.created_at FROM ${payments} p JOIN ${input} i USING (reference)
    RETURNING id, transaction_id
  )`;
}

export function settleAttemptCte(verdict: AttemptVerdict) {
  return {
    key: `attempt:${verdict.status}`,
    values: [verdict.attemptId, ...verdictValues(verdict)],
    sql: (first: number) => settleText(verdict.status, `$${first}`, [`$${first + 1}`, `$${first + 2}`, `$${first + 3}`]),
  };
}

/**
 * The verdicts of a batch of payments' attempts (applyTransitions' lead): each input row's attempt (attempt_id, of
 * the payment input.id) settles to `status` with its code, reason and provider reference, each written once.
 */
export function settleAttemptsBatchLead(status: SettledAttemptStatus): BatchLeadWrite {
  return {
    key: `attempts:${status}`,
    columns: { attempt_id: "int", attempt_code: "text", attempt_reason: "text", attempt_provider_reference: "text" },
    objectColumn: "transaction_id",
    sql: (input) => `UPDATE transaction_attempts SET status = '${status}', code = ${input}.attempt_code, reason = ${input}.attempt_reason,
      provider_reference = COALESCE(${input}.attempt_provider_reference, transaction_attempts.provider_reference), settled_at = now()
    FROM ${input} WHERE transaction_attempts.id = ${input}.attempt_id AND transaction_attempts.transaction_id = ${input}.id
      AND transaction_attempts.status IN (${attemptGuard(status).map((s) => `'${s}'`).join(", ")})
    RETURNING transaction_attempts.*`,
  };
}

/** A verdict as the batch lead's input columns. */
export function attemptVerdictColumns(verdict: AttemptVerdict): Record<string, unknown> {
  const [code, reason, providerReference] = verdictValues(verdict);
  return { attempt_id: verdict.attemptId, attempt_code: code, attempt_reason: reason, attempt_provider_reference: providerReference };
}

export function createAttemptStore(db: { prisma: PrismaClient; sql: Sql }) {
  const { prisma, sql } = db;

  async function findOne(text: string, params: unknown[]): Promise<PayerAttempt | null> {
    const [row] = await sql.query<AttemptRow>(text, params);
    return row ? fromRow(row) : null;
  }

  return {
    /**
     * Claims a pending payment for one page attempt, inserted with the claim; `attempt` null: the claim only (the
     * expiry sweep). `cardLapsedBefore`/`pushLapsedBefore`: a held claim older than these may be taken over. Null when
     * there is no such payment.
     */
    async claim(id: number, at: Date, options: { cardLapsedBefore: Date; pushLapsedBefore: Date; attempt: NewAttempt | null }): Promise<Claimed | null> {
      const { attempt } = options;
      const [row] = await sql.query<Claimed>(CLAIM_FOR_ATTEMPT, [
        id, at, options.cardLapsedBefore, options.pushLapsedBefore, attempt?.method ?? null, attempt?.detail ?? null, attempt?.channelId ?? null, attempt?.phoneNumber ?? null,
        attempt?.language ?? null, attempt?.cardBrand ?? null,
      ]);
      return row ?? null;
    },

    /**
     * claim() for a page push, unless another payment of the same merchant has a page push to the same number waiting
     * for its answer ("phone_busy"). Check and claim run under a transaction-scoped advisory lock on (merchant, number),
     * so two pushes racing on two instances cannot both pass the check.
     */
    claimPushUnlessPhoneBusy(id: number, at: Date, options: { merchantId: number; cardLapsedBefore: Date; pushLapsedBefore: Date; attempt: NewAttempt & { phoneNumber: string } }) {
      const { attempt } = options;
      return prisma.$transaction(async (tx): Promise<Claimed | "phone_busy" | null> => {
        await tx.$queryRawUnsafe(`SELECT pg_advisory_xact_lock($1::int, hashtext($2::text)) IS NULL AS locked`, options.merchantId, `push:${attempt.phoneNumber}`);
        const busy = await tx.$queryRawUnsafe<unknown[]>(PENDING_PUSH_TO_PHONE, attempt.phoneNumber, options.pushLapsedBefore, options.merchantId, id);
        if (busy.length > 0) return "phone_busy";
        const [row] = await tx.$queryRawUnsafe<Claimed[]>(
          CLAIM_FOR_ATTEMPT, id, at, options.cardLapsedBefore, options.pushLapsedBefore, attempt.method, attempt.detail, attempt.channelId ?? null, attempt.phoneNumber,
          attempt.language ?? null, attempt.cardBrand ?? null,
        );
        return row ?? null;
      });
    },

    /** An API push's attempt, inserted with its payment in the caller's database transaction (UNSENT_CLAIM when keyed). */
    insertApiPush(tx: Prisma.TransactionClient, push: { transactionId: number; channelId: number; phoneNumber: string | null; detail: string | null; createdAt: Date; sendClaim: string | null }) {
      return tx.transactionAttempt.create({ data: { ...push, method: PUSH_METHOD, origin: "api" } });
    },

    /**
     * Takes on the sending of a keyed API push for `claim`, a request's own token (compare-and-set on send_claim):
     * true when that claim holds it, now or already (the same statement again, after its answer was lost); false when
     * another request took it, or the attempt is settled. Only a true may send.
     */
    async takeSending(id: number, claim: string): Promise<boolean> {
      const rows = await sql.query<{ id: number }>(TAKE_SENDING, [id, claim]);
      return rows.length > 0;
    },

    /** A saved card's charge (POST /v1/charges), inserted with its payment in the caller's database transaction. */
    insertApiCharge(tx: Prisma.TransactionClient, charge: { transactionId: number; channelId: number; detail: string | null; createdAt: Date }) {
      return tx.transactionAttempt.create({ data: { ...charge, method: "card", origin: "api" } });
    },

    /**
     * The attempt of a payment the provider reported on its own (C2B), inserted with its payment in the caller's
     * database transaction: once per receipt, as the payment is (its unique channel + provider reference).
     */
    insertReportedPayment(tx: Prisma.TransactionClient, payment: { transactionId: number; channelId: number; phoneNumber: string | null; detail: string | null; providerReference: string; createdAt: Date }) {
      return tx.transactionAttempt.create({
        data: { ...payment, method: REPORTED_METHOD, origin: "c2b", status: REPORTED_STATUS, settledAt: payment.createdAt },
      });
    },

    /**
     * Records a failed verdict on an attempt holding its payment's claim, and releases the claim while fewer than
     * `maxAttempts` of the payment's attempts have failed: the number failed, or null when already settled.
     */
    async settleFailed(verdict: Omit<AttemptVerdict, "status" | "providerReference">, maxAttempts: number): Promise<number | null> {
      const [row] = await sql.query<{ failed: number }>(SETTLE_FAILED, [verdict.attemptId, ...verdictValues({ ...verdict, status: "failed" }), maxAttempts]);
      return row ? row.failed : null;
    },

    findById: (id: number) => findOne(BY_ID, [id]),

    /** The attempt a provider's callback names: its channel and the request id the provider gave it (unique together). */
    findByRequest: (channelId: number, checkoutRequestId: string) => findOne(BY_REQUEST, [channelId, checkoutRequestId]),

    /** A payment's newest attempt still waiting for a verdict, or null. */
    findLatestPending: (transactionId: number) => findOne(LATEST_PENDING, [transactionId]),

    /**
     * Records the provider's id for an accepted push, which its callback and status query name. Not yet run: the
     * caller runs it (prisma.$transaction with the payment's copy: push.ts).
     */
    setRequestId(id: number, checkoutRequestId: string) {
      return prisma.transactionAttempt.update({ where: { id }, data: { checkoutRequestId } });
    },

    /** A charge that ended with no outcome: the attempt (while still pending) goes and its claim is released (FORGET_AND_RELEASE). */
    async forgetAndRelease(attemptId: number, transactionId: number, claimedAt: Date): Promise<void> {
      await sql.query(FORGET_AND_RELEASE, [attemptId, transactionId, claimedAt]);
    },

    /** A payment's attempts, oldest first (GraphQL Transaction.attempts, the dashboard). */
    list(transactionId: number) {
      return prisma.transactionAttempt.findMany({ where: { transactionId }, orderBy: { id: "asc" } });
    },

    /** The succeeded attempts of these payments, oldest first, in one statement (a batch of receipts). */
    listSucceeded(transactionIds: number[]) {
      return prisma.transactionAttempt.findMany({ where: { transactionId: { in: transactionIds }, status: "succeeded" }, orderBy: { id: "asc" } });
    },

    /** What the payer's page shows of a payment's attempts, oldest first. */
    listForPayer(transactionId: number) {
      return prisma.transactionAttempt.findMany({ where: { transactionId }, orderBy: { id: "asc" }, select: { method: true, status: true, code: true, reason: true, detail: true } });
    },
  };
}

export type AttemptStore = ReturnType<typeof createAttemptStore>;
