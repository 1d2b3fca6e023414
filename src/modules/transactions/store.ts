import type { Principal } from "../../auth.ts";
import type { Db, PrismaClient, Sql } from "../../db/database.ts";
import type { Prisma, Transaction } from "../../db/generated/prisma/client.ts";
import { ValidationError } from "../../errors.ts";
import { statusDateWhere, type StatusDateFilters } from "../../filters.ts";
import { listStatements, resolvePaging, toPage, type CountedList, type Page, type Paging } from "../../paging.ts";
import { phoneOrNull } from "../../phone.ts";
import {
  selectsColumnsOnly,
  TRANSACTION_COLUMNS,
  TRANSACTION_SUMMARY_COLUMNS,
  transactionFromRow,
  transactionSummaryFromRow,
  type TransactionSummaryRow,
  type TransactionRow,
} from "./rows.ts";

/**
 * Every statement on the `transactions` table, behind named functions: the one place that chooses plain
 * SQL (src/db/sql.ts, for the hot paths: verify, list, initialize, card payments, STK callbacks) or Prisma
 * (everything else, and any read whose GraphQL selection needs relations). Callers pass values, never SQL
 * text or conditions. The status change itself is status.ts's one statement, built from
 * TRANSACTION_COLUMNS; the row <-> model mapping is rows.ts.
 */

export { TRANSACTION_COLUMNS, transactionFromRow, type TransactionRow } from "./rows.ts";

/** A Pothos-derived Prisma query: the relations (or fields) a GraphQL selection needs, so one read serves it. */
export type TransactionQuery = { include?: Prisma.TransactionInclude; select?: Prisma.TransactionSelect };

export type TransactionFilters = StatusDateFilters & {
  /** One term matched exactly against the reference, client reference, provider receipt, e-mail or phone. */
  search?: string | null;
  /** Exact matches on one field each (the shop's order number, the M-Pesa receipt, the payer), all of them at once. */
  clientReference?: string | null;
  receipt?: string | null;
  phone?: string | null;
  email?: string | null;
  /** One of the merchant's customers, by its id. */
  customer?: number | null;
};

const MAX_SEARCH_LENGTH = 100;

/** A search term as each column stores it; null for no search. */
export interface TransactionSearch {
  /** Compared as typed with reference, client_reference and provider_reference. */
  text: string;
  /** The e-mail as stored (lower-cased), when the term looks like one. */
  email: string | null;
  /** The phone as stored (E.164), when the term reads as one: +254..., 254... or a Kenyan 07.../01.... */
  phone: string | null;
}

/**
 * Exact matches only, so each branch of the OR is an index scan (the unique reference, and the
 * (merchant, mode, column) indexes of the others); a substring search would read every row of the merchant.
 */
export function parseTransactionSearch(search: string | null | undefined): TransactionSearch | null {
  const text = search?.trim();
  if (!text) return null;
  if (text.length > MAX_SEARCH_LENGTH) throw new ValidationError("search", `must be at most ${MAX_SEARCH_LENGTH} characters`);
  const email = text.includes("@") ? text.toLowerCase() : null;
  return { text, email, phone: phoneOrNull(text) };
}

/** The one-field filters as the columns store them: each compared exactly, through its (merchant, mode, column) index. */
export interface TransactionExactFilters {
  clientReference?: string;
  providerReference?: string;
  phoneNumber?: string;
  email?: string;
  customerId?: number;
}

/** A text filter's value, trimmed; undefined when not given; a 400 naming it when too long. */
function exactText(value: string | null | undefined, field: string): string | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (text.length > MAX_SEARCH_LENGTH) throw new ValidationError(field, `must be at most ${MAX_SEARCH_LENGTH} characters`);
  return text;
}

/** The one-field filters, checked and written as stored (the phone as E.164 whatever form was typed, the e-mail lower-cased). */
export function parseExactFilters(filters: TransactionFilters): TransactionExactFilters {
  const exact: TransactionExactFilters = {};
  const clientReference = exactText(filters.clientReference, "client_reference");
  if (clientReference) exact.clientReference = clientReference;
  const receipt = exactText(filters.receipt, "receipt");
  if (receipt) exact.providerReference = receipt;
  const phone = exactText(filters.phone, "phone");
  if (phone) {
    const e164 = phoneOrNull(phone);
    if (!e164) throw new ValidationError("phone", "must be a phone number: 07XXXXXXXX, 2547XXXXXXXX, +2547XXXXXXXX or another country's with its leading +");
    exact.phoneNumber = e164;
  }
  const email = exactText(filters.email, "email");
  if (email) exact.email = email.toLowerCase();
  if (filters.customer != null) {
    if (!Number.isSafeInteger(filters.customer) || filters.customer < 1) throw new ValidationError("customer", "must be a customer's id (a positive integer)");
    exact.customerId = filters.customer;
  }
  return exact;
}

/** Status, inclusive date range, the exact filters and search as a Prisma filter, scoped to the caller's merchant and mode. */
export function transactionWhere(principal: Principal, filters: TransactionFilters): Prisma.TransactionWhereInput {
  const where: Prisma.TransactionWhereInput = { ...statusDateWhere(principal, filters), ...parseExactFilters(filters) };
  const search = parseTransactionSearch(filters.search);
  if (search) {
    where.OR = [
      { reference: search.text },
      { clientReference: search.text },
      { providerReference: search.text },
      ...(search.email ? [{ email: search.email }] : []),
      ...(search.phone ? [{ phoneNumber: search.phone }] : []),
    ];
  }
  return where;
}

/** Newest first; id breaks ties between rows created in the same millisecond. */
export const newestFirst: Prisma.TransactionOrderByWithRelationInput[] = [{ createdAt: "desc" }, { id: "desc" }];

/** Initialize's row, with the payer's customer details for the same statement. */
export interface CheckoutRow {
  reference: string;
  accessCode: string;
  amount: bigint;
  currency: string;
  description: string | null;
  /** Null for a payment link's M-Pesa payer who gave none: then no customer either. */
  email: string | null;
  phone: string | null;
  firstName: string | null;
  lastName: string | null;
  channelId: number;
  callbackUrl: string | null;
  clientReference: string | null;
  metadata: Record<string, unknown> | null;
}

/** Where a collection's receipt came from: a provider's own unique id for one payment, per channel. */
export interface ProviderReceipt {
  channelId: number;
  providerReference: string;
}

/** What claimCharge answers: whether this attempt holds the charge, and the row's status either way. */
export interface ChargeClaim {
  claimed: boolean;
  status: Transaction["status"];
}

/** The single-row reads on plain SQL, each one fixed text (prepared once per connection, src/db/sql.ts). */
const selectWhere = (condition: string) => `SELECT ${TRANSACTION_COLUMNS} FROM transactions WHERE ${condition}`;
const BY_ID = selectWhere("id = $1");
const BY_IDS = selectWhere("id = ANY($1::int[])");
/**
 * A payment by reference within the caller's merchant and mode: found through the reference's unique index alone, then
 * checked for scope. With the scope beside the reference in one WHERE, the prepared statement's generic plan could take
 * a (merchant_id, mode, ...) index on statistics from when the merchant had few payments and filter all of them for the
 * reference (bench/billing.ts: verify walked up to 100,000 rows a request during a billing run, until autoanalyze ran).
 * OFFSET 0 keeps the subquery from being merged into the outer WHERE.
 */
const inScopeByReference = (columns: string) =>
  `SELECT ${columns} FROM (SELECT * FROM transactions WHERE reference = $1 OFFSET 0) transactions WHERE merchant_id = $2 AND mode = $3::"Mode"`;
const BY_REFERENCE_IN_SCOPE = inScopeByReference(TRANSACTION_COLUMNS);
const SUMMARY_BY_REFERENCE_IN_SCOPE = inScopeByReference(TRANSACTION_SUMMARY_COLUMNS);
const BY_REFERENCE = selectWhere("reference = $1");
const BY_COLLECTION_REQUEST = selectWhere("channel_id = $1 AND checkout_request_id = $2");

/**
 * Initialize's insert, with the payer's customer in the same statement: the existing one by e-mail, else
 * a new one (ON CONFLICT covers a concurrent first payment by the same e-mail). A returning payer's
 * customer row is left as it is, as findOrCreateCustomer does. No e-mail (a link's M-Pesa payer): no customer.
 * Under an Idempotency-Key ($16, the claim) the row is the key's recovery point in the same statement (src/idempotency):
 * an interactive transaction would hold list_counts' row locks (its insert trigger) across round trips, and keyed
 * initializes then queued on one another (bench/README.md, 127 against 2,099 req/s).
 */
const INSERT_CHECKOUT = `WITH existing AS (
     SELECT id FROM customers WHERE merchant_id = $1 AND mode = $2::"Mode" AND email = $3
   ), created AS (
     INSERT INTO customers (merchant_id, mode, email, first_name, last_name, phone)
     SELECT $1, $2::"Mode", $3, $4, $5, $6 WHERE $3::text IS NOT NULL AND NOT EXISTS (SELECT 1 FROM existing)
     ON CONFLICT (merchant_id, mode, email) DO UPDATE SET email = EXCLUDED.email
     RETURNING id
   ), inserted AS (
     INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, description, email,
       phone_number, channel_id, customer_id, callback_url, client_reference, metadata, updated_at)
     VALUES ($1, $2::"Mode", $7, $8, $9::bigint, $10, 'pending', $11, $3, $6, $12,
       COALESCE((SELECT id FROM existing), (SELECT id FROM created)), $13, $14, $15::jsonb, now())
     RETURNING ${TRANSACTION_COLUMNS}
   ), recovery_point AS (
     UPDATE idempotency_keys SET recovery_point = 'transaction:' || (SELECT id FROM inserted) WHERE id = $16::bigint
   )
   SELECT * FROM inserted`;

/** The card charge's claim: the conditional UPDATE, and the row's status when it did not apply, in one round trip. */
const CLAIM_CHARGE = `WITH claimed AS (
     UPDATE transactions SET charge_started_at = $2, updated_at = $2
     WHERE id = $1 AND status = 'pending' AND (charge_started_at IS NULL OR charge_started_at < $3)
     RETURNING status
   )
   SELECT true AS claimed, status::text FROM claimed
   UNION ALL SELECT false, status::text FROM transactions WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM claimed)`;

const CTE_NAME = /^[a-z_][a-z0-9_]*$/;
const cteName = (name: string) => {
  if (!CTE_NAME.test(name)) throw new Error(`not a plain SQL identifier: ${name}`);
  return name;
};

/**
 * Invoice charges' pending card payments, one per row of the CTE `input` (its columns named as the transactions
 * table's), as a data-modifying CTE `name` returning the rows inserted: a row whose (invoice, attempt) already has its
 * payment (another instance's, a crash's) is skipped. status.ts's insertInvoiceCharges builds the statement around it.
 */
export function insertInvoiceChargesCte(name: string, input: string): string {
  return `${cteName(name)} AS (
    INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, description, email, channel_id,
      customer_id, payment_method, payment_method_id, client_reference, metadata, invoice_id, invoice_attempt, updated_at)
    SELECT merchant_id, mode::"Mode", reference, access_code, amount, currency, 'pending', description, email, channel_id,
      customer_id, 'card', payment_method_id, client_reference, metadata, invoice_id, invoice_attempt, now()
    FROM ${cteName(input)} ORDER BY invoice_id
    ON CONFLICT (invoice_id, invoice_attempt) DO NOTHING
    RETURNING *
  )`;
}

async function findOne(sql: Sql, text: string, params: readonly unknown[]): Promise<Transaction | null> {
  const [row] = await sql.query<TransactionRow>(text, params);
  return row ? transactionFromRow(row) : null;
}

/** The one transaction with this id, read with plain SQL (the status change's re-read), or null. */
export function findById(sql: Sql, id: number): Promise<Transaction | null> {
  return findOne(sql, BY_ID, [id]);
}

/**
 * Inserts a pending transaction in the caller's database transaction (status.ts's
 * insertPendingTransaction, which adds its event, jobs and recovery point).
 */
export function createPending(tx: Prisma.TransactionClient, data: Prisma.TransactionUncheckedCreateInput): Promise<Transaction> {
  return tx.transaction.create({ data: { ...data, status: "pending" } });
}

/** The payment a refund is reserved against, as its row lock found it. */
export interface LockedPayment {
  id: number;
  merchantId: number;
  mode: Transaction["mode"];
  reference: string;
  amount: bigint;
  currency: string;
  status: Transaction["status"];
  channelId: number | null;
  /** Its latest dispute's status (null: never disputed), and what lost disputes took back. */
  disputeStatus: string | null;
  amountChargedBack: bigint;
}

/**
 * The transaction's row, locked (FOR UPDATE) in the caller's database transaction: refunds of one payment
 * are decided one at a time, on any number of instances. Null when there is no such transaction.
 */
export async function lockForRefund(tx: Prisma.TransactionClient, id: number): Promise<LockedPayment | null> {
  const [row] = await tx.$queryRaw<(Omit<LockedPayment, "amount" | "amountChargedBack"> & { amount: string; amountChargedBack: string })[]>`
    SELECT id, merchant_id AS "merchantId", mode, reference, amount::text AS amount, currency, status, channel_id AS "channelId",
      dispute_status AS "disputeStatus", amount_charged_back::text AS "amountChargedBack"
    FROM transactions WHERE id = ${id} FOR UPDATE`;
  return row ? { ...row, amount: BigInt(row.amount), amountChargedBack: BigInt(row.amountChargedBack) } : null;
}

/** A payment's disputes are decided one at a time with its refunds: the same row lock (disputes/store.ts). */
export const lockForDispute = lockForRefund;

/**
 * For a dispute's statements (disputes/store.ts), over its changed or created row `t`: the payment shows the dispute's
 * status, and a lost dispute adds its amount to what was charged back, in the same statement as the change.
 */
export const disputeOnPaymentCte = (lost: boolean) =>
  `disputed_payment AS (UPDATE transactions SET dispute_status = t.status${lost ? ", amount_charged_back = transactions.amount_charged_back + t.amount" : ""} FROM t WHERE transactions.id = t.transaction_id)`;

/**
 * For the refunds' status change (events/status-machine.ts): a CTE over the completed refund's row `t` that
 * adds its amount to its transaction's amount_refunded, in the same statement as the change.
 */
export const ADD_REFUNDED_AMOUNT_CTE =
  "refunded AS (UPDATE transactions SET amount_refunded = transactions.amount_refunded + t.amount FROM t WHERE transactions.id = t.transaction_id)";

/**
 * For retention (modules/retention/store.ts): true when the transaction of the event `e` is still pending, whose
 * history is then kept however old.
 */
export const EVENT_TRANSACTION_PENDING = "EXISTS (SELECT 1 FROM transactions t WHERE t.id = e.transaction_id AND t.status = 'pending')";

/**
 * A channel's payments created in [from, to), oldest first: the gateway's side of a reconciliation's day. The channel's
 * merchant and mode (always its own) make the day a range of the (merchant, mode, created_at) index, not a walk of it all.
 */
export function listChannelDay(db: Pick<PrismaClient, "transaction">, channel: { id: number; merchantId: number; mode: Transaction["mode"] }, from: Date, to: Date) {
  return db.transaction.findMany({
    where: { merchantId: channel.merchantId, mode: channel.mode, channelId: channel.id, createdAt: { gte: from, lt: to } },
    orderBy: { id: "asc" },
    // With what tells a payment the provider reversed apart from one the gateway knows is given back: a lost dispute, a full refund.
    select: { id: true, reference: true, providerReference: true, checkoutRequestId: true, amount: true, currency: true, status: true, createdAt: true, disputeStatus: true, amountRefunded: true },
  });
}

/** Which of these references the channel has, whatever the day (a provider's record dated across midnight from ours). */
/** The payments a payment link made, newest first (a link's detail in the dashboard); `query` is the GraphQL selection. */
export function paymentsOfLink(db: Pick<PrismaClient, "transaction">, linkId: number, limit: number, query: { include?: Prisma.TransactionInclude; select?: Prisma.TransactionSelect } = {}) {
  return db.transaction.findMany({ ...query, where: { paymentLink: { linkId } }, orderBy: { id: "desc" }, take: limit });
}

export async function channelReferences(db: Pick<PrismaClient, "transaction">, channelId: number, references: string[]): Promise<Set<string>> {
  if (!references.length) return new Set();
  const rows = await db.transaction.findMany({ where: { channelId, reference: { in: references } }, select: { reference: true } });
  return new Set(rows.map((r) => r.reference));
}

const EXACT_COLUMNS: Record<keyof TransactionExactFilters, string> = {
  clientReference: "client_reference",
  providerReference: "provider_reference",
  phoneNumber: "phone_number",
  email: "email",
  customerId: "customer_id",
};

/**
 * The list's filters as paging.ts counts and pages them: status and the date window are kept by the rollups
 * (list_counts); a search and the exact filters are not (the total is then counted from the exact-match indexes,
 * each branch or filter an index scan).
 */
function countedList(where: ReturnType<typeof statusDateWhere>, search: TransactionSearch | null, exact: TransactionExactFilters = {}): CountedList {
  const created = where.createdAt as { gte?: Date; lt?: Date } | undefined;
  const filters = Object.entries(exact) as [keyof TransactionExactFilters, string | number][];
  return {
    table: "transactions",
    merchantId: where.merchantId,
    mode: where.mode,
    ...(where.status ? { key: { column: "status", type: '"TransactionStatus"', values: [where.status] } } : {}),
    ...(created ? { createdAt: { gte: created.gte, lt: created.lt } } : {}),
    ...(search || filters.length
      ? {
          extra: (param: (value: unknown) => string) => {
            const conditions = filters.map(([field, value]) => `${EXACT_COLUMNS[field]} = ${param(value)}${field === "customerId" ? "::int" : ""}`);
            if (search) {
              const text = param(search.text);
              const branches = [`reference = ${text}`, `client_reference = ${text}`, `provider_reference = ${text}`];
              if (search.email) branches.push(`email = ${param(search.email)}`);
              if (search.phone) branches.push(`phone_number = ${param(search.phone)}`);
              conditions.push(`(${branches.join(" OR ")})`);
            }
            return conditions.join(" AND ");
          },
        }
      : {}),
  };
}

/** The list's filters, checked, as countedList takes them. */
const listOf = (principal: Principal, filters: TransactionFilters) =>
  countedList(statusDateWhere(principal, filters), parseTransactionSearch(filters.search), parseExactFilters(filters));

/** The statements on `transactions`, bound to the gateway's database. */
export function createTransactionStore(db: { prisma: PrismaClient; sql: Sql }) {
  const { prisma, sql } = db;

  /**
   * The list's page and its total in one round trip and one snapshot: the total from the database's rollups
   * (or, with a search, counted from its indexes), the page's ids from the list's index (paging.ts
   * listStatements), then those rows. A page past the end is the one row of the count with no transaction in it.
   */
  async function sqlPage(list: CountedList, paging: Paging, summary: boolean): Promise<[Transaction[], number]> {
    const { params, cte, total, ids } = listStatements(list, paging);
    const rows = await sql.query<{ total: number } & ({ id: null } | TransactionRow)>(
      `${cte}SELECT counted.total, page.* FROM (SELECT ${total} AS total) counted
       LEFT JOIN LATERAL (
         SELECT ${summary ? TRANSACTION_SUMMARY_COLUMNS : TRANSACTION_COLUMNS} FROM transactions WHERE id IN (${ids})
       ) page ON true
       ORDER BY page."createdAt" DESC, page.id DESC`,
      params,
    );
    const fromRow = summary ? transactionSummaryFromRow : transactionFromRow;
    const items = rows.flatMap(({ total: _total, ...row }) => (row.id === null ? [] : [fromRow(row as TransactionRow)]));
    return [items, rows[0]!.total];
  }

  return {
    /** Initialize's one statement: the payer's customer (found or created) and the pending row (INSERT_CHECKOUT). */
    async insertCheckout(principal: Principal, t: CheckoutRow): Promise<Transaction> {
      const [row] = await sql.query<TransactionRow>(INSERT_CHECKOUT, [
        principal.merchantId,
        principal.mode,
        t.email,
        t.firstName,
        t.lastName,
        t.phone,
        t.reference,
        t.accessCode,
        t.amount.toString(),
        t.currency,
        t.description,
        t.channelId,
        t.callbackUrl,
        t.clientReference,
        t.metadata === null ? null : JSON.stringify(t.metadata),
        principal.idempotency?.claimId.toString() ?? null,
      ]);
      return transactionFromRow(row!);
    },

    findById: (id: number) => findById(sql, id),

    /** The transactions with these ids that exist, in one statement (a batch of receipts). */
    async findByIds(ids: number[]): Promise<Transaction[]> {
      return (await sql.query<TransactionRow>(BY_IDS, [ids])).map(transactionFromRow);
    },

    /** An M-Pesa saved method's charge: its push's payment, tied to the customer and the method it charged. */
    /** The charge of this subscription invoice's attempt (1, 2 ...), or null: unique per invoice and attempt. */
    findByInvoiceAttempt(invoiceId: number, attempt: number): Promise<Transaction | null> {
      return prisma.transaction.findUnique({ where: { invoiceId_invoiceAttempt: { invoiceId, invoiceAttempt: attempt } } });
    },

    /** The payer's choice on the checkout page: save (or not) the card or phone this payment is made with. */
    async setSavePaymentMethod(id: number, save: boolean): Promise<void> {
      await prisma.transaction.updateMany({ where: { id, status: "pending" }, data: { savePaymentMethod: save } });
    },

    /** The caller's transaction with this id (an Idempotency-Key retry's recovered one), or null. */
    findInScope(principal: Principal, id: number): Promise<Transaction | null> {
      return prisma.transaction.findFirst({ where: { id, merchantId: principal.merchantId, mode: principal.mode } });
    },

    /**
     * The caller's transaction by reference, within its merchant and mode (verify: one plain-SQL statement);
     * with Prisma when `query` asks for relations, so one read serves the GraphQL selection.
     */
    /** The same with the summary fields alone (rows.ts): REST verify's read. */
    async findSummaryByReference(principal: Principal, reference: string): Promise<Transaction | null> {
      const [row] = await sql.query<TransactionSummaryRow>(SUMMARY_BY_REFERENCE_IN_SCOPE, [reference, principal.merchantId, principal.mode]);
      return row ? transactionSummaryFromRow(row) : null;
    },

    async findByReference(principal: Principal, reference: string, query: TransactionQuery = {}): Promise<Transaction | null> {
      if (selectsColumnsOnly(query)) return findOne(sql, BY_REFERENCE_IN_SCOPE, [reference, principal.merchantId, principal.mode]);
      return (await prisma.transaction.findFirst({ ...query, where: { reference, merchantId: principal.merchantId, mode: principal.mode } })) as Transaction | null;
    },

    /** The payer's checkout: the reference alone names the transaction (it is unguessable), whoever's it is. */
    findForPayer(reference: string): Promise<Transaction | null> {
      return findOne(sql, BY_REFERENCE, [reference]);
    },

    /** With its channel, by reference; within one channel when a provider's notice names it. */
    findWithChannelByReference(reference: string, channelId?: number) {
      return channelId === undefined
        ? prisma.transaction.findUnique({ where: { reference }, include: { channel: true } })
        : prisma.transaction.findFirst({ where: { reference, channelId }, include: { channel: true } });
    },

    /** The caller's transaction by id or reference, within its merchant and mode, with its channel (a refund's payment). */
    findWithChannelInScope(principal: Principal, key: { id: number } | { reference: string }) {
      return prisma.transaction.findFirst({ where: { ...key, merchantId: principal.merchantId, mode: principal.mode }, include: { channel: true } });
    },

    /** With its channel, by id (the reconcile job). */
    findWithChannelById(id: number) {
      return prisma.transaction.findUnique({ where: { id }, include: { channel: true } });
    },

    /** The collection a provider's callback answers: its channel and the request id the provider gave the push. */
    findByCollectionRequest(channelId: number, providerRequestId: string): Promise<Transaction | null> {
      return findOne(sql, BY_COLLECTION_REQUEST, [channelId, providerRequestId]);
    },

    /** The payment recorded for a provider's receipt on a channel (unique), or null. */
    findByProviderReceipt(receipt: ProviderReceipt): Promise<Transaction | null> {
      return prisma.transaction.findFirst({ where: { channelId: receipt.channelId, providerReference: receipt.providerReference } });
    },

    /** The newest C2B payment on a channel for a bill reference and amount since a moment (a simulated C2B's outcome). */
    findLatestC2b(channelId: number, match: { clientReference: string; amount: bigint; since: Date }): Promise<Transaction | null> {
      return prisma.transaction.findFirst({
        where: { channelId, paymentMethod: "momo_c2b", clientReference: match.clientReference, amount: match.amount, createdAt: { gte: match.since } },
        orderBy: { id: "desc" },
      });
    },

    /** Shows an accepted STK push's request id on its payment too (REST, webhooks). Not yet run: push.ts runs it with the attempt's. */
    setCollectionRequest(id: number, checkoutRequestId: string) {
      return prisma.transaction.update({ where: { id }, data: { checkoutRequestId } });
    },

    /** Records where a hosted-checkout provider's page for this payment is. */
    setHostedPage(id: number, page: { accessCode: string; checkoutUrl: string }): Promise<Transaction> {
      return prisma.transaction.update({ where: { id }, data: { providerAccessCode: page.accessCode, providerCheckoutUrl: page.checkoutUrl } });
    },

    /**
     * Claims a pending transaction for one card charge: sets charge_started_at to `claimedAt` unless another
     * claim newer than `lapsedBefore` holds it. Answers the row's status either way (CLAIM_CHARGE); null when
     * there is no such transaction.
     */
    async claimCharge(id: number, claimedAt: Date, lapsedBefore: Date): Promise<ChargeClaim | null> {
      const [claim] = await sql.query<ChargeClaim>(CLAIM_CHARGE, [id, claimedAt, lapsedBefore]);
      return claim ?? null;
    },

    /** Releases the claim `claimedAt` wrote (and only that one: a later claim that took over stays). */
    async releaseCharge(id: number, claimedAt: Date): Promise<void> {
      await prisma.transaction.updateMany({ where: { id, chargeStartedAt: claimedAt }, data: { chargeStartedAt: null } });
    },

    /**
     * One page of the caller's transactions, newest first, with the total. Plain SQL, one statement, when the
     * selection reads columns only (with `summary`, only the summary columns, rows.ts); otherwise Prisma with
     * the relations `query` carries (no N+1). Filters are checked before paging, as the list always has.
     */
    async listPage(
      principal: Principal,
      input: TransactionFilters & { page?: number | null; limit?: number | null },
      query: TransactionQuery = {},
      summary = false,
    ): Promise<Page<Transaction>> {
      const list = listOf(principal, input);
      if (selectsColumnsOnly(query)) {
        const paging = resolvePaging(input);
        const [items, total] = await sqlPage(list, paging, summary);
        return toPage(items, total, paging);
      }
      // The page's ids and the total as the plain-SQL page finds them, then those rows with their relations.
      const paging = resolvePaging(input);
      const { params, cte, total, ids } = listStatements(list, paging);
      const [page] = await sql.query<{ total: number; ids: number[] }>(`${cte}SELECT ${total} AS total, ARRAY(${ids}) AS ids`, params);
      const items = page!.ids.length ? await prisma.transaction.findMany({ ...query, where: { id: { in: page!.ids } }, orderBy: newestFirst }) : [];
      return toPage(items as Transaction[], page!.total, paging);
    },

    /** The Relay connection's rows: Pothos's `query` carries the cursor, the window and the relations. */
    listConnection(principal: Principal, filters: TransactionFilters, query: object) {
      return prisma.transaction.findMany({ ...query, where: transactionWhere(principal, filters), orderBy: { id: "desc" } });
    },

    /**
     * Every one of the caller's transactions matching the filters, newest first, in batches read by keyset on
     * (created_at, id), the list's index: a year of them is never in memory at once, the last batch costs what the
     * first did (an OFFSET would rescan all before it), and no connection is held between batches (a client that
     * stops reading, or goes away, holds none). The export's own statement, plain SQL with only the columns the CSV
     * writes: Prisma's rows cost several times the CPU and garbage at a million rows (bench/README.md, CSV
     * exports). The filters are checked here, before the first batch is asked for.
     */
    exportBatches(principal: Principal, filters: TransactionFilters, batchSize = 1000): AsyncGenerator<TransactionExportRow[]> {
      const { first, next, params } = exportStatements(principal, filters, batchSize);
      return (async function* () {
        let after: [string, number] | null = null;
        for (;;) {
          const rows: (TransactionExportRow & { createdAtKey: string })[] = after ? await sql.query(next, [...params, ...after]) : await sql.query(first, params);
          if (rows.length === 0) return;
          const last = rows[rows.length - 1]!;
          yield rows;
          if (rows.length < batchSize) return;
          after = [last.createdAtKey, last.id];
        }
      })();
    },

    /** How many of the caller's transactions match the filters (the connection's totalCount). */
    async count(principal: Principal, filters: TransactionFilters): Promise<number> {
      // With a one-row page, so the statement uses every parameter (paging.ts countRows).
      const { params, cte, total, ids } = listStatements(listOf(principal, filters), { page: 1, limit: 1 });
      const [row] = await sql.query<{ total: number }>(`${cte}SELECT ${total} AS total, ARRAY(${ids}) AS ids`, params);
      return row!.total;
    },

    /** What the payer's checkout page shows, with the merchant's name and the channel's provider; null when unknown. */
    findCheckoutView(reference: string) {
      return prisma.transaction.findUnique({
        where: { reference },
        select: {
          merchantId: true, reference: true, amount: true, currency: true, status: true, description: true, mode: true,
          failureReason: true, callbackUrl: true,
          merchant: { select: { name: true } }, channel: { select: { provider: true } },
        },
      });
    },
  };
}

export type TransactionStore = ReturnType<typeof createTransactionStore>;

/** A transaction as the CSV export reads it: the columns it writes, amounts as the database's text (exact). */
export interface TransactionExportRow {
  id: number;
  reference: string;
  status: string;
  amount: string;
  amountRefunded: string;
  currency: string;
  paymentMethod: string | null;
  channelId: number | null;
  email: string | null;
  phoneNumber: string | null;
  clientReference: string | null;
  providerReference: string | null;
  description: string | null;
  failureCode: string | null;
  failureReason: string | null;
  createdAt: Date | string;
  completedAt: Date | string | null;
  fee: string | null;
}

/**
 * The export's first-batch and next-batch statements, with transactionWhere's conditions: only the filters given
 * become conditions (values always parameters), so the planner sees plain index bounds. The keyset's created_at
 * goes back as the database wrote it (text), so no driver's Date conversion can move it.
 */
function exportStatements(principal: Principal, filters: TransactionFilters, batchSize: number) {
  const scope = statusDateWhere(principal, filters);
  const exact = parseExactFilters(filters);
  const search = parseTransactionSearch(filters.search);
  const params: unknown[] = [scope.merchantId, scope.mode];
  const bind = (value: unknown, cast: string) => `$${params.push(value)}::${cast}`;
  const where = [`merchant_id = $1::int`, `mode = $2::"Mode"`];
  if (scope.status) where.push(`status = ${bind(scope.status, `"TransactionStatus"`)}`);
  if (scope.createdAt?.gte) where.push(`created_at >= ${bind(scope.createdAt.gte, "timestamptz")}`);
  if (scope.createdAt?.lt) where.push(`created_at < ${bind(scope.createdAt.lt, "timestamptz")}`);
  if (exact.clientReference) where.push(`client_reference = ${bind(exact.clientReference, "text")}`);
  if (exact.providerReference) where.push(`provider_reference = ${bind(exact.providerReference, "text")}`);
  if (exact.phoneNumber) where.push(`phone_number = ${bind(exact.phoneNumber, "text")}`);
  if (exact.email) where.push(`email = ${bind(exact.email, "text")}`);
  if (exact.customerId) where.push(`customer_id = ${bind(exact.customerId, "int")}`);
  if (search) {
    const text = bind(search.text, "text");
    const any = [`reference = ${text}`, `client_reference = ${text}`, `provider_reference = ${text}`];
    if (search.email) any.push(`email = ${bind(search.email, "text")}`);
    if (search.phone) any.push(`phone_number = ${bind(search.phone, "text")}`);
    where.push(`(${any.join(" OR ")})`);
  }
  const select = `SELECT id, reference, status::text AS status, amount::text AS amount, amount_refunded::text AS "amountRefunded", currency,
      payment_method AS "paymentMethod", channel_id AS "channelId", email, phone_number AS "phoneNumber", client_reference AS "clientReference",
      provider_reference AS "providerReference", description, failure_code AS "failureCode", failure_reason AS "failureReason",
      created_at AS "createdAt", completed_at AS "completedAt", fee::text AS fee, created_at::text AS "createdAtKey"
    FROM transactions`;
  const order = `ORDER BY transactions.created_at DESC, transactions.id DESC LIMIT ${bind(batchSize, "int")}`;
  const keyset = `(created_at, id) < ($${params.length + 1}::timestamptz, $${params.length + 2}::int)`;
  return {
    params,
    first: `${select} WHERE ${where.join(" AND ")} ${order}`,
    next: `${select} WHERE ${where.join(" AND ")} AND ${keyset} ${order}`,
  };
}

/* ---- The payment's side of its attempts (attempt-store.ts owns transaction_attempts and builds these into its statements). ---- */

/**
 * The claim one attempt at a time holds, and the attempt's insert, in one statement: charge_started_at is set to
 * the attempt's created_at (its token). A held claim lapses when older than the card lease ($3), or, when
 * `heldByPush` (a condition over the claimed row `t`) says an STK push in flight holds it, older than the push's
 * lifetime ($4). `insertAttempt` is a CTE named `attempt` over `claimed` (id), answering the new attempt's id.
 */
export function claimStatement(parts: { heldByPush: string; insertAttempt: string }): string {
  return `WITH claimed AS (
    UPDATE transactions t SET charge_started_at = $2, updated_at = $2
    WHERE t.id = $1 AND t.status = 'pending' AND (t.charge_started_at IS NULL OR t.charge_started_at < CASE
      WHEN ${parts.heldByPush} THEN $4::timestamptz ELSE $3::timestamptz END)
    RETURNING t.id
  ), ${parts.insertAttempt}
  SELECT true AS claimed, 'pending' AS status, (SELECT id FROM attempt) AS "attemptId" FROM claimed
  UNION ALL SELECT false, status::text, NULL FROM transactions WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM claimed)`;
}

/** The amount of the attempt `a`'s payment, as a scalar subquery (a provider's verdict must match it). */
export const paymentAmountOf = (a: string) => `(SELECT t.amount FROM transactions t WHERE t.id = ${a}.transaction_id)`;

/** True when the attempt `a`'s payment is the merchant's (parameter `merchantParam`) and is not `otherParam`. */
export const paymentOfMerchantBesides = (a: string, merchantParam: string, otherParam: string) =>
  `EXISTS (SELECT 1 FROM transactions t WHERE t.id = ${a}.transaction_id AND t.merchant_id = ${merchantParam} AND t.id <> ${otherParam})`;

/** The statement releasing the claims of the rows of `transactions t` (joined to `from`, if given) that `where` picks. */
export const releaseClaimText = (where: string, from?: string) =>
  `UPDATE transactions t SET charge_started_at = NULL${from ? ` FROM ${from}` : ""} WHERE ${where} RETURNING t.id`;

/**
 * Pending hosted-checkout payments (no payment method yet: from initialize) created before `before`, oldest
 * first; not those opened at a hosted-checkout provider (its access code), which its own reconciliation abandons.
 */
export function findExpiredCheckouts(sql: Sql, before: Date, limit: number): Promise<{ id: number; channelId: number | null }[]> {
  return sql.query(
    `SELECT id, channel_id AS "channelId" FROM transactions
     WHERE status = 'pending' AND payment_method IS NULL AND provider_access_code IS NULL AND created_at < $1
     ORDER BY created_at LIMIT $2`,
    [before, limit],
  );
}

/**
 * The charges of the invoice aliased `invoice` in a billing read (billing/store.ts), as a JSON array in attempt order:
 * the fields Prisma's INVOICE_LINKS include reads, one subquery per invoice row.
 */
export const invoiceChargesJson = (invoice: string) =>
  `coalesce((SELECT json_agg(json_build_object('reference', t.reference, 'invoiceAttempt', t.invoice_attempt, 'status', t.status,
    'failureCode', t.failure_code, 'providerCheckoutUrl', t.provider_checkout_url, 'createdAt', t.created_at) ORDER BY t.invoice_attempt)
  FROM transactions t WHERE t.invoice_id = ${invoice}.id), '[]'::json)`;
