import type { Prisma } from "../../db/generated/prisma/client.ts";
import type { MoneySubject, TerminalStatus } from "../events/status-rules.ts";

/**
 * The posting rules of the double-entry ledger, as SQL the money statements embed: a journal entry and its
 * postings are written by the same statement as the status change (or creation) that caused them, so a
 * crash leaves both or neither. A step posts once because the status change it rides on applies once (the
 * guarded UPDATE), and the entries' unique index on source and step would refuse a second (failing the
 * whole statement, never half-writing it). Every rule's legs sum to zero (checked as the rules load;
 * `ledger check` proves it of every entry); the database refuses UPDATE or DELETE of any ledger row.
 * An account's id is found by a join; the first posting to an account makes it (ledger_account(), which
 * also answers when a concurrent statement made it unseen by this one's snapshot).
 *
 * Accounts, per merchant, mode, channel and currency: `available` (what the provider holds for the
 * merchant), `pending_out` (reserved for refunds and payouts in flight), `disputed` (held while a payer's chargeback
 * is open), `fees` (what the provider kept), and the outside world split by who is on the other side: `payers`,
 * `refunds`, `payees`, `adjustments`, `chargebacks` (what lost disputes took back).
 */
export const ACCOUNT_KINDS = ["available", "pending_out", "disputed", "fees", "payers", "refunds", "payees", "adjustments", "chargebacks"] as const;
export type AccountKind = (typeof ACCOUNT_KINDS)[number];

/**
 * Entry types. The reservations move money inside the merchant's holding and are not balance transactions. A dispute's
 * hold is one: the payer's bank has it, so it leaves what the merchant can use (available) for `disputed`, which is
 * not part of the net; a win brings it back, and a loss makes it final (its net is only the provider's fee, if any).
 */
export const BALANCE_TRANSACTION_TYPES = ["payment", "refund", "refund_failure", "payout", "payout_failure", "adjustment", "dispute_hold", "dispute_release", "dispute_loss"] as const;
export type BalanceTransactionType = (typeof BALANCE_TRANSACTION_TYPES)[number];
export type EntryType = BalanceTransactionType | "refund_reservation" | "payout_reservation";
export type EntrySource = "transaction" | "refund" | "payout" | "adjustment" | "dispute";

/**
 * One rule. Amounts are linear in the source's amount (`src.amount`) and the entry's fee (`e.fee`), written as
 * [coefficient of the amount, coefficient of the fee]: the entry's `amount` is the change in available +
 * pending_out plus the fee (what the merchant's balance transactions show, money in positive), and each leg
 * moves money on one account. As data, a rule's balance is checked where it is defined (balanced() below).
 */
type Linear = readonly [amount: -1 | 0 | 1, fee: -1 | 0 | 1];
interface PostingRule {
  type: EntryType;
  amount: Linear;
  /** SQL for the fee ("0" but for payments). */
  fee: string;
  legs: ReadonlyArray<readonly [AccountKind, Linear]>;
}

/** A rule whose legs do not sum to zero for every amount and fee is a programming error: refused at load. */
function balanced(rule: PostingRule): PostingRule {
  const amounts = rule.legs.reduce((sum, [, [amount]]) => sum + amount, 0);
  const fees = rule.legs.reduce((sum, [, [, fee]]) => sum + fee, 0);
  if (amounts !== 0 || fees !== 0) throw new Error(`ledger rule ${rule.type} does not balance`);
  return rule;
}

const linearSql = ([amount, fee]: Linear): string =>
  [amount ? `${amount < 0 ? "-" : ""}src.amount` : "", fee ? `${fee < 0 ? "- " : amount ? "+ " : ""}e.fee` : ""].filter(Boolean).join(" ") || "0";

/**
 * A payment's fee is the one its completing status change wrote on the row (transactions/status.ts: the channel's
 * schedule at that moment, by the SQL function payment_fee()), so the ledger and every read of the payment agree.
 */
const PAYMENT_FEE = "src.fee";

const IN: Linear = [1, 0];
const OUT: Linear = [-1, 0];
const NOTHING: Linear = [0, 0];
const reserve = (type: EntryType) => balanced({ type, amount: NOTHING, fee: "0", legs: [["available", OUT], ["pending_out", IN]] });
const release = (type: EntryType) => balanced({ type, amount: NOTHING, fee: "0", legs: [["pending_out", OUT], ["available", IN]] });
const send = (type: EntryType, to: AccountKind) => balanced({ type, amount: OUT, fee: "0", legs: [["pending_out", OUT], [to, IN]] });

type Step = "created" | TerminalStatus | "won" | "lost";

/** What each step of each money object posts. A failed payment moved no money and posts nothing. */
const RULES: Record<MoneySubject | "dispute", Partial<Record<Step, PostingRule>>> = {
  transaction: {
    completed: balanced({ type: "payment", amount: IN, fee: PAYMENT_FEE, legs: [["payers", OUT], ["available", [1, -1]], ["fees", [0, 1]]] }),
  },
  refund: { created: reserve("refund_reservation"), completed: send("refund", "refunds"), failed: release("refund_failure") },
  payout: { created: reserve("payout_reservation"), completed: send("payout", "payees"), failed: release("payout_failure") },
  // A dispute's fee (src.fee) is what the provider charged on the loss: 0 where it charges none.
  dispute: {
    created: balanced({ type: "dispute_hold", amount: OUT, fee: "0", legs: [["available", OUT], ["disputed", IN]] }),
    won: balanced({ type: "dispute_release", amount: IN, fee: "0", legs: [["disputed", OUT], ["available", IN]] }),
    lost: balanced({ type: "dispute_loss", amount: NOTHING, fee: "src.fee", legs: [["disputed", OUT], ["chargebacks", IN], ["available", [0, -1]], ["fees", [0, 1]]] }),
  },
};

const ADJUSTMENT = balanced({ type: "adjustment", amount: IN, fee: "0", legs: [["available", IN], ["adjustments", OUT]] });

/** An adjustment's note and author; a status change has neither. */
const NO_NOTE = { note: "NULL", createdBy: "NULL" };

/**
 * The entry and postings CTEs (`ledger_entry`, `ledger_legs`) for a rule over the CTE `from` (one row, or a batch's
 * changed rows), each row read as `src` (id, merchant_id, mode, channel_id, currency, reference, amount).
 */
function postingCtes(source: EntrySource, rule: PostingRule, from: string, extra = NO_NOTE): string {
  const legs = rule.legs.map(([kind, amount]) => `('${kind}', (${linearSql(amount)})::bigint)`).join(", ");
  return `ledger_entry AS (
    INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee, note, created_by)
    SELECT src.merchant_id, src.mode, src.channel_id, src.currency, '${rule.type}', '${source}', src.id, src.reference, ${linearSql(rule.amount)}, ${rule.fee}, ${extra.note}, ${extra.createdBy}
    -- A dispute of a payment already refunded in full holds nothing: it moves no money and posts nothing.
    FROM ${from} src WHERE src.channel_id IS NOT NULL AND src.amount <> 0
    RETURNING id, source_id, merchant_id, mode, channel_id, currency, fee
  ), ledger_legs AS (
    INSERT INTO ledger_postings (entry_id, account_id, amount)
    SELECT e.id, coalesce(a.id, ledger_account(e.merchant_id, e.mode, e.channel_id, e.currency, leg.kind)), leg.amount
    -- Each entry with its own source row (a batch of status changes has many; an adjustment's id is null).
    FROM ledger_entry e JOIN ${from} src ON src.id IS NOT DISTINCT FROM e.source_id CROSS JOIN LATERAL (VALUES ${legs}) AS leg(kind, amount)
    LEFT JOIN ledger_accounts a
      ON a.merchant_id = e.merchant_id AND a.mode = e.mode AND a.channel_id = e.channel_id AND a.currency = e.currency AND a.kind = leg.kind
    WHERE leg.amount <> 0
    RETURNING entry_id
  )`;
}

/**
 * The postings of a status change, for the status machine's statement (events/status-machine.ts), whose
 * changed row is the CTE `t`: null when the step moves no money.
 */
export function postingsOnChange(subject: MoneySubject | "dispute", to: string): string | null {
  const rule = RULES[subject][to as Step];
  return rule ? postingCtes(subject, rule, "t") : null;
}

const TABLES: Record<"refund" | "payout" | "dispute", string> = { refund: "refunds", payout: "payouts", dispute: "disputes" };

/**
 * Reserves a new refund's or payout's amount (available -> pending_out), in the caller's database transaction
 * that created it: the reservation commits with the row or not at all.
 */
export async function postReservation(tx: Prisma.TransactionClient, subject: "refund" | "payout" | "dispute", id: number): Promise<void> {
  const rule = RULES[subject].created!;
  await tx.$executeRawUnsafe(`WITH created AS (SELECT * FROM ${TABLES[subject]} WHERE id = $1), ${postingCtes(subject, rule, "created")} SELECT count(*) FROM ledger_legs`, id);
}

export interface NewAdjustment {
  merchantId: number;
  mode: "test" | "live";
  channelId: number;
  currency: string;
  reference: string;
  /** Signed, minor units: positive adds to available. */
  amount: bigint;
  note: string;
  createdBy: number | null;
}

/** A correction: a new entry (available <-> adjustments), never an edit. Answers the entry's id. */
export async function postAdjustment(tx: Prisma.TransactionClient, a: NewAdjustment): Promise<bigint> {
  const source = `adjustment AS (SELECT NULL::int AS id, $1::int AS merchant_id, $2::"Mode" AS mode, $3::int AS channel_id, $4::text AS currency,
    $5::text AS reference, $6::bigint AS amount)`;
  const [row] = await tx.$queryRawUnsafe<{ id: bigint }[]>(
    `WITH ${source}, ${postingCtes("adjustment", ADJUSTMENT, "adjustment", { note: "$7::text", createdBy: "$8::int" })} SELECT id FROM ledger_entry`,
    a.merchantId, a.mode, a.channelId, a.currency, a.reference, a.amount, a.note, a.createdBy,
  );
  return row!.id;
}
