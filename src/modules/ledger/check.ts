import type { PrismaClient } from "../../db/database.ts";
import type { Prisma } from "../../db/generated/prisma/client.ts";
import { channelBalances, type ChannelBalance } from "./store.ts";

/**
 * The ledger's proof (`npm run cli -- ledger check`): recomputes what the ledger must say from its own rows and
 * from the business tables (transactions, refunds, payouts), and lists every difference. The posting rules are
 * restated here on purpose, as plain SQL independent of postings.ts: a rule that posts the wrong legs is caught
 * by a check that does not share its text. Every check is one set-based statement (a full scan and a join or
 * two), never a query per row, and all of them read one snapshot (REPEATABLE READ), so a ledger written to while
 * it is checked shows no half-made differences.
 */

/** Each check, in the order the report prints them, with what it proves. */
export const LEDGER_CHECKS = {
  entries_balance: "every entry's postings sum to zero, there are at least two, on known accounts of its own channel",
  entries_agree: "every entry's amount and fee agree with its postings (net = postings on available + pending_out; fee = posting on fees)",
  postings_follow_rules: "every entry's postings are the ones its rule gives for its source's amount",
  sources_have_entries: "every completed payment, every refund and payout (reservation), every completed or failed refund and payout, every dispute (hold) and every won or lost one has its entry",
  entries_have_sources: "no entry points at a missing source, or at one in another state, channel, currency or amount, and a payment's entry books the fee written on the payment",
  balances_recomputed: "every channel's balances recomputed from the postings equal what the API reports (channelBalances)",
  balances_from_journal: "the balance transactions add up to the balances (sum of net = available + pending_out; collected, fees, refunded, paid out)",
  balances_match_business: "collected, refunded, paid_out, pending_out, disputed and charged_back equal the completed payments, refunds, payouts, the ones in flight, the open and the lost disputes",
} as const;
export type LedgerCheckName = keyof typeof LEDGER_CHECKS;

export interface LedgerDifference {
  check: LedgerCheckName;
  detail: string;
}

export interface LedgerCheckResult {
  counts: { entries: number; postings: number; accounts: number; channelBalances: number };
  /** Differences found per check (all of them, even where `differences` lists fewer). */
  found: Record<LedgerCheckName, number>;
  /** The differences themselves, at most `limit` per check. */
  differences: LedgerDifference[];
  clean: boolean;
}

type Tx = Prisma.TransactionClient;

/** The entry types each source may have, and the source each entry type names. */
const SOURCE_OF_TYPE = `(VALUES ('payment', 'transaction'), ('refund_reservation', 'refund'), ('refund', 'refund'), ('refund_failure', 'refund'),
  ('payout_reservation', 'payout'), ('payout', 'payout'), ('payout_failure', 'payout'), ('adjustment', 'adjustment'),
  ('dispute_hold', 'dispute'), ('dispute_release', 'dispute'), ('dispute_loss', 'dispute')) AS st(type, source_type)`;
const ACCOUNT_KINDS = "('available', 'pending_out', 'disputed', 'fees', 'payers', 'refunds', 'payees', 'adjustments', 'chargebacks')";
const BALANCE_TYPES = "('payment', 'refund', 'refund_failure', 'payout', 'payout_failure', 'adjustment', 'dispute_hold', 'dispute_release', 'dispute_loss')";

/** One problem row of a check's statement: its text, and how many rows the whole statement found. */
interface ProblemRow {
  detail: string;
  total: number;
}

async function problems(tx: Tx, sql: string, limit: number): Promise<ProblemRow[]> {
  // MATERIALIZED: planned as a whole scan on its own. Under the LIMIT the planner would pick a fast-start plan
  // (nested loops in key order), which the window's count reads to the end: minutes instead of seconds.
  return tx.$queryRawUnsafe<ProblemRow[]>(`WITH found AS MATERIALIZED (${sql}) SELECT detail, (count(*) OVER ())::int AS total FROM found ORDER BY sort_key LIMIT $1`, limit);
}

/**
 * The rules, restated: each entry type's leg on each account kind, over `s` (the source's amount) and the entry's
 * own fee and amount (a payment's fee is the entry's: the channel's schedule may have changed since).
 */
const RULE_LEGS: Record<string, Partial<Record<(typeof KINDS)[number], string>>> = {
  payment: { payers: "-s", available: "s - e.fee", fees: "e.fee" },
  refund_reservation: { available: "-s", pending_out: "s" },
  refund: { pending_out: "-s", refunds: "s" },
  refund_failure: { pending_out: "-s", available: "s" },
  payout_reservation: { available: "-s", pending_out: "s" },
  payout: { pending_out: "-s", payees: "s" },
  payout_failure: { pending_out: "-s", available: "s" },
  adjustment: { available: "e.amount", adjustments: "-e.amount" },
  dispute_hold: { available: "-s", disputed: "s" },
  dispute_release: { disputed: "-s", available: "s" },
  dispute_loss: { disputed: "-s", chargebacks: "s", available: "-e.fee", fees: "e.fee" },
};
const KINDS = ["available", "pending_out", "disputed", "fees", "payers", "refunds", "payees", "adjustments", "chargebacks"] as const;

/** The expected leg of one kind, as a CASE over the entry's type (0 where its rule has none). */
function expectedLeg(kind: (typeof KINDS)[number]): string {
  const arms = Object.entries(RULE_LEGS)
    .filter(([, legs]) => legs[kind])
    .map(([type, legs]) => `WHEN '${type}' THEN ${legs[kind]!.replaceAll(/\bs\b/g, "e.source_amount")}`);
  return `(CASE e.type ${arms.join(" ")} ELSE 0 END)`;
}

/**
 * Three checks of every entry against its own postings, in one pass over the postings (grouped by entry once):
 * entries_balance (balanced, two legs or more, on known accounts of the entry's merchant, mode, channel and
 * currency, a known type for its source), entries_agree (net = available + pending_out legs, fee = fees leg) and
 * postings_follow_rules (each kind's leg as the rule gives it for the source's amount).
 */
const ENTRY_CHECKS = `
  WITH legs AS (
    SELECT p.entry_id, count(*) AS legs, sum(p.amount) AS total,
      ${KINDS.map((kind) => `coalesce(sum(p.amount) FILTER (WHERE a.kind = '${kind}'), 0) AS "${kind}"`).join(",\n      ")},
      count(*) FILTER (WHERE a.kind NOT IN ${ACCOUNT_KINDS}) AS unknown_kinds,
      min(a.merchant_id) AS min_merchant, max(a.merchant_id) AS max_merchant, min(a.mode) AS min_mode, max(a.mode) AS max_mode,
      min(a.channel_id) AS min_channel, max(a.channel_id) AS max_channel, min(a.currency) AS min_currency, max(a.currency) AS max_currency
    FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id
    GROUP BY p.entry_id
  ), x AS (
    SELECT e.id, e.type, e.source_type, e.source_reference, e.amount, e.fee, coalesce(l.legs, 0) AS legs, coalesce(l.total, 0) AS total, coalesce(l.unknown_kinds, 0) AS unknown_kinds,
      ${KINDS.map((kind) => `coalesce(l."${kind}", 0) AS "${kind}"`).join(", ")},
      (l.entry_id IS NOT NULL AND (l.min_merchant <> e.merchant_id OR l.max_merchant <> e.merchant_id OR l.min_mode <> e.mode OR l.max_mode <> e.mode
        OR l.min_channel <> e.channel_id OR l.max_channel <> e.channel_id OR l.min_currency <> e.currency OR l.max_currency <> e.currency)) AS foreign_legs,
      st.type IS NOT NULL AS known_type,
      CASE e.source_type WHEN 'transaction' THEN t.amount WHEN 'refund' THEN r.amount WHEN 'payout' THEN po.amount WHEN 'dispute' THEN d.amount END AS source_amount,
      (e.source_type = 'adjustment' OR coalesce(t.id, r.id, po.id, d.id) IS NOT NULL) AS has_source
    FROM ledger_entries e
    LEFT JOIN legs l ON l.entry_id = e.id
    LEFT JOIN ${SOURCE_OF_TYPE} ON st.type = e.type AND st.source_type = e.source_type
    LEFT JOIN transactions t ON e.source_type = 'transaction' AND t.id = e.source_id
    LEFT JOIN refunds r ON e.source_type = 'refund' AND r.id = e.source_id
    LEFT JOIN payouts po ON e.source_type = 'payout' AND po.id = e.source_id
    LEFT JOIN disputes d ON e.source_type = 'dispute' AND d.id = e.source_id
  ), found AS MATERIALIZED (
    SELECT v.check_name, e.id AS sort_key, 'entry ' || e.id || ' (' || e.type || ' ' || e.source_reference || '): ' || v.detail AS detail
    FROM x e
    CROSS JOIN LATERAL (VALUES
      ('entries_balance', nullif(concat_ws('; ',
        CASE WHEN e.legs < 2 THEN e.legs || ' posting(s), at least 2 expected' END,
        CASE WHEN e.total <> 0 THEN 'postings sum to ' || e.total || ', not 0' END,
        CASE WHEN e.foreign_legs THEN 'posting(s) on an account of another merchant, mode, channel or currency' END,
        CASE WHEN e.unknown_kinds > 0 THEN e.unknown_kinds || ' posting(s) on an account of unknown kind' END,
        CASE WHEN NOT e.known_type THEN 'type ' || e.type || ' with source ' || e.source_type || ' is no known rule' END), '')),
      ('entries_agree', nullif(concat_ws('; ',
        CASE WHEN e.available + e.pending_out <> e.amount - e.fee
          THEN 'net ' || (e.amount - e.fee) || ' (amount ' || e.amount || ' - fee ' || e.fee || ') but its postings on available + pending_out sum to ' || (e.available + e.pending_out) END,
        CASE WHEN e.fees <> e.fee THEN 'fee ' || e.fee || ' but its postings on fees sum to ' || e.fees END), '')),
      ('postings_follow_rules', CASE WHEN e.known_type AND e.has_source THEN nullif(concat_ws('; ',
        ${KINDS.map((kind) => `CASE WHEN e."${kind}" <> ${expectedLeg(kind)} THEN '${kind} ' || e."${kind}" || ' posted, ' || ${expectedLeg(kind)} || ' by the rule' END`).join(",\n        ")}), '') END)
    ) AS v(check_name, detail)
    -- Cheap comparisons first: the texts are made only for the entries that differ.
    WHERE (e.legs < 2 OR e.total <> 0 OR e.foreign_legs OR e.unknown_kinds > 0 OR NOT e.known_type
      OR e.available + e.pending_out <> e.amount - e.fee OR e.fees <> e.fee
      OR (e.known_type AND e.has_source AND (${KINDS.map((kind) => `e."${kind}" <> ${expectedLeg(kind)}`).join(" OR ")})))
      AND v.detail IS NOT NULL
  )
  SELECT check_name AS "check", detail, total FROM (
    SELECT check_name, detail, sort_key, (count(*) OVER (PARTITION BY check_name))::int AS total, row_number() OVER (PARTITION BY check_name ORDER BY sort_key) AS n
    FROM found
  ) numbered WHERE n <= $1 ORDER BY check_name, sort_key`;

/** What the business tables say each source's entries must be: one row per (source, entry type). */
const EXPECTED_ENTRIES = `
  SELECT 'transaction' AS source_type, id AS source_id, 'payment' AS type, 'completed' AS state, merchant_id, mode, channel_id, currency, reference, amount, fee FROM transactions WHERE status = 'completed' AND channel_id IS NOT NULL
  UNION ALL SELECT 'refund', id, 'refund_reservation', 'created', merchant_id, mode, channel_id, currency, reference, 0, NULL FROM refunds
  UNION ALL SELECT 'refund', id, 'refund', 'completed', merchant_id, mode, channel_id, currency, reference, -amount, NULL FROM refunds WHERE status = 'completed'
  UNION ALL SELECT 'refund', id, 'refund_failure', 'failed', merchant_id, mode, channel_id, currency, reference, 0, NULL FROM refunds WHERE status = 'failed'
  UNION ALL SELECT 'payout', id, 'payout_reservation', 'created', merchant_id, mode, channel_id, currency, reference, 0, NULL FROM payouts
  UNION ALL SELECT 'payout', id, 'payout', 'completed', merchant_id, mode, channel_id, currency, reference, -amount, NULL FROM payouts WHERE status = 'completed'
  UNION ALL SELECT 'payout', id, 'payout_failure', 'failed', merchant_id, mode, channel_id, currency, reference, 0, NULL FROM payouts WHERE status = 'failed'
  UNION ALL SELECT 'dispute', id, 'dispute_hold', 'created', merchant_id, mode, channel_id, currency, reference, -amount, NULL FROM disputes WHERE amount > 0
  UNION ALL SELECT 'dispute', id, 'dispute_release', 'won', merchant_id, mode, channel_id, currency, reference, amount, NULL FROM disputes WHERE status = 'won' AND amount > 0
  UNION ALL SELECT 'dispute', id, 'dispute_loss', 'lost', merchant_id, mode, channel_id, currency, reference, 0, NULL FROM disputes WHERE status = 'lost' AND amount > 0`;

const SOURCES_HAVE_ENTRIES = `
  SELECT x.source_id AS sort_key, x.source_type || ' ' || x.source_id || ' (' || x.reference || ', ' || x.state || '): no ' || x.type || ' entry' AS detail
  FROM (${EXPECTED_ENTRIES}) x
  WHERE NOT EXISTS (SELECT 1 FROM ledger_entries e WHERE e.source_type = x.source_type AND e.source_id = x.source_id AND e.type = x.type)`;

const ENTRIES_HAVE_SOURCES = `
  SELECT e.id AS sort_key, 'entry ' || e.id || ' (' || e.type || ' ' || e.source_reference || '): ' || CASE
      WHEN s.source_id IS NULL AND NOT EXISTS (
        SELECT 1 FROM transactions t WHERE e.source_type = 'transaction' AND t.id = e.source_id
        UNION ALL SELECT 1 FROM refunds r WHERE e.source_type = 'refund' AND r.id = e.source_id
        UNION ALL SELECT 1 FROM payouts p WHERE e.source_type = 'payout' AND p.id = e.source_id
        UNION ALL SELECT 1 FROM disputes d WHERE e.source_type = 'dispute' AND d.id = e.source_id)
        THEN 'its source ' || e.source_type || ' ' || coalesce(e.source_id::text, '(none)') || ' does not exist'
      WHEN s.source_id IS NULL THEN 'its source ' || e.source_type || ' ' || e.source_id || ' is not in a state that posts ' || e.type
      ELSE concat_ws('; ',
        CASE WHEN (e.merchant_id, e.mode, e.channel_id) IS DISTINCT FROM (s.merchant_id, s.mode, s.channel_id)
          THEN 'merchant ' || e.merchant_id || ' ' || e.mode || ' channel ' || e.channel_id || ', its source says merchant ' || s.merchant_id || ' ' || s.mode || ' channel ' || s.channel_id END,
        CASE WHEN e.currency <> s.currency THEN 'currency ' || e.currency || ', its source says ' || s.currency END,
        CASE WHEN e.source_reference <> s.reference THEN 'reference ' || e.source_reference || ', its source says ' || s.reference END,
        CASE WHEN e.amount <> s.amount THEN 'amount ' || e.amount || ', its source says ' || s.amount END,
        CASE WHEN s.fee IS NOT NULL AND e.fee <> s.fee THEN 'fee ' || e.fee || ', its payment says ' || s.fee END,
        CASE WHEN e.type NOT IN ('payment', 'dispute_loss') AND e.fee <> 0 THEN 'fee ' || e.fee || ' on a ' || e.type || ' (only payments and lost disputes have fees)' END,
        CASE WHEN e.fee < 0 THEN 'negative fee ' || e.fee END)
    END AS detail
  FROM ledger_entries e
  LEFT JOIN (${EXPECTED_ENTRIES}) s ON s.source_type = e.source_type AND s.source_id = e.source_id AND s.type = e.type
  WHERE e.source_type <> 'adjustment' AND (s.source_id IS NULL
    OR (e.merchant_id, e.mode, e.channel_id, e.currency, e.source_reference, e.amount) IS DISTINCT FROM (s.merchant_id, s.mode, s.channel_id, s.currency, s.reference, s.amount)
    OR (s.fee IS NOT NULL AND e.fee <> s.fee) OR (e.type NOT IN ('payment', 'dispute_loss') AND e.fee <> 0) OR e.fee < 0)`;

/** Every figure of every channel and currency, three ways: from the postings, from the journal, from the business tables. */
const FIGURES = `
  WITH by_account AS (
    SELECT a.merchant_id, a.mode, a.channel_id, a.currency, a.kind, coalesce(sum(p.amount), 0) AS balance
    FROM ledger_accounts a LEFT JOIN ledger_postings p ON p.account_id = a.id
    GROUP BY a.id
  ), postings AS (
    SELECT merchant_id, mode, channel_id, currency,
      -sum(balance) FILTER (WHERE kind = 'payers') AS collected, sum(balance) FILTER (WHERE kind = 'fees') AS fees,
      sum(balance) FILTER (WHERE kind = 'refunds') AS refunded, sum(balance) FILTER (WHERE kind = 'payees') AS paid_out,
      sum(balance) FILTER (WHERE kind = 'pending_out') AS pending_out, -sum(balance) FILTER (WHERE kind = 'adjustments') AS adjustments,
      sum(balance) FILTER (WHERE kind = 'disputed') AS disputed, sum(balance) FILTER (WHERE kind = 'chargebacks') AS charged_back,
      sum(balance) FILTER (WHERE kind = 'available') AS available, sum(balance) AS total
    FROM by_account GROUP BY merchant_id, mode, channel_id, currency
  ), journal AS (
    SELECT merchant_id, mode, channel_id, currency,
      sum(amount) FILTER (WHERE type = 'payment') AS collected, sum(fee) AS fees,
      -sum(amount) FILTER (WHERE type = 'refund') AS refunded, -sum(amount) FILTER (WHERE type = 'payout') AS paid_out,
      sum(amount) FILTER (WHERE type = 'adjustment') AS adjustments, sum(amount - fee) FILTER (WHERE type IN ${BALANCE_TYPES}) AS net
    FROM ledger_entries GROUP BY merchant_id, mode, channel_id, currency
  ), business AS (
    SELECT merchant_id, mode, channel_id, currency, sum(collected) AS collected, sum(refunded) AS refunded, sum(paid_out) AS paid_out, sum(pending_out) AS pending_out,
      sum(disputed) AS disputed, sum(charged_back) AS charged_back
    FROM (
      SELECT merchant_id, mode, channel_id, currency, amount AS collected, 0 AS refunded, 0 AS paid_out, 0 AS pending_out, 0 AS disputed, 0 AS charged_back FROM transactions WHERE status = 'completed' AND channel_id IS NOT NULL
      UNION ALL SELECT merchant_id, mode, channel_id, currency, 0, CASE WHEN status = 'completed' THEN amount ELSE 0 END, 0, CASE WHEN status = 'pending' THEN amount ELSE 0 END, 0, 0 FROM refunds
      UNION ALL SELECT merchant_id, mode, channel_id, currency, 0, 0, CASE WHEN status = 'completed' THEN amount ELSE 0 END, CASE WHEN status = 'pending' THEN amount ELSE 0 END, 0, 0 FROM payouts
      UNION ALL SELECT merchant_id, mode, channel_id, currency, 0, 0, 0, 0, CASE WHEN status IN ('needs_response', 'under_review') THEN amount ELSE 0 END, CASE WHEN status = 'lost' THEN amount ELSE 0 END FROM disputes
    ) moves GROUP BY merchant_id, mode, channel_id, currency
  ), keys AS (
    SELECT merchant_id, mode, channel_id, currency FROM postings UNION SELECT merchant_id, mode, channel_id, currency FROM journal
    UNION SELECT merchant_id, mode, channel_id, currency FROM business
  )
  SELECT k.merchant_id AS "merchantId", k.mode::text AS mode, k.channel_id AS "channelId", k.currency,
    json_build_object('collected', coalesce(p.collected, 0)::text, 'fees', coalesce(p.fees, 0)::text, 'refunded', coalesce(p.refunded, 0)::text,
      'paidOut', coalesce(p.paid_out, 0)::text, 'pendingOut', coalesce(p.pending_out, 0)::text, 'adjustments', coalesce(p.adjustments, 0)::text,
      'disputed', coalesce(p.disputed, 0)::text, 'chargedBack', coalesce(p.charged_back, 0)::text,
      'available', coalesce(p.available, 0)::text, 'total', coalesce(p.total, 0)::text) AS postings,
    json_build_object('collected', coalesce(j.collected, 0)::text, 'fees', coalesce(j.fees, 0)::text, 'refunded', coalesce(j.refunded, 0)::text,
      'paidOut', coalesce(j.paid_out, 0)::text, 'adjustments', coalesce(j.adjustments, 0)::text, 'net', coalesce(j.net, 0)::text) AS journal,
    json_build_object('collected', coalesce(b.collected, 0)::text, 'refunded', coalesce(b.refunded, 0)::text,
      'paidOut', coalesce(b.paid_out, 0)::text, 'pendingOut', coalesce(b.pending_out, 0)::text,
      'disputed', coalesce(b.disputed, 0)::text, 'chargedBack', coalesce(b.charged_back, 0)::text) AS business
  FROM keys k
  LEFT JOIN postings p USING (merchant_id, mode, channel_id, currency)
  LEFT JOIN journal j USING (merchant_id, mode, channel_id, currency)
  LEFT JOIN business b USING (merchant_id, mode, channel_id, currency)
  ORDER BY k.merchant_id, k.mode, k.channel_id, k.currency`;

interface FigureRow {
  merchantId: number;
  mode: "test" | "live";
  channelId: number;
  currency: string;
  postings: Record<"collected" | "fees" | "refunded" | "paidOut" | "pendingOut" | "adjustments" | "disputed" | "chargedBack" | "available" | "total", string>;
  journal: Record<"collected" | "fees" | "refunded" | "paidOut" | "adjustments" | "net", string>;
  business: Record<"collected" | "refunded" | "paidOut" | "pendingOut" | "disputed" | "chargedBack", string>;
}

const FIGURE_NAMES = {
  collected: "collected", fees: "fees", refunded: "refunded", paidOut: "paid_out", pendingOut: "pending_out", adjustments: "adjustments",
  disputed: "disputed", chargedBack: "charged_back", available: "available",
} as const;

/** Runs every check on one snapshot of the database. `limit` caps the differences listed per check (not those counted). */
export async function checkLedger(prisma: PrismaClient, options: { limit?: number } = {}): Promise<LedgerCheckResult> {
  const limit = options.limit ?? 20;
  return prisma.$transaction(
    async (tx) => {
      // First statement of the transaction: every read below sees the same committed moment.
      await tx.$executeRawUnsafe("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
      const found = Object.fromEntries(Object.keys(LEDGER_CHECKS).map((name) => [name, 0])) as Record<LedgerCheckName, number>;
      const differences: LedgerDifference[] = [];
      const add = (check: LedgerCheckName, rows: ProblemRow[]) => {
        found[check] += rows[0]?.total ?? 0;
        for (const row of rows) differences.push({ check, detail: row.detail });
      };
      for (const row of await tx.$queryRawUnsafe<(ProblemRow & { check: LedgerCheckName })[]>(ENTRY_CHECKS, limit)) {
        if (!differences.some((d) => d.check === row.check)) found[row.check] += row.total;
        differences.push({ check: row.check, detail: row.detail });
      }
      const statements: [LedgerCheckName, string][] = [
        ["sources_have_entries", SOURCES_HAVE_ENTRIES],
        ["entries_have_sources", ENTRIES_HAVE_SOURCES],
      ];
      // One after another: an interactive transaction is one connection.
      for (const [check, sql] of statements) add(check, await problems(tx, sql, limit));

      const figures = await tx.$queryRawUnsafe<FigureRow[]>(FIGURES);
      const listed: Record<string, number> = {};
      const differ = (check: LedgerCheckName, detail: string) => {
        found[check]++;
        listed[check] = (listed[check] ?? 0) + 1;
        if (listed[check]! <= limit) differences.push({ check, detail });
      };

      // What the API reports, scope by scope (one query per merchant and mode, not per row).
      const reported = new Map<string, ChannelBalance>();
      const scopes = [...new Set(figures.map((f) => `${f.merchantId}|${f.mode}`))];
      for (const scope of scopes) {
        const [merchantId, mode] = scope.split("|") as [string, "test" | "live"];
        for (const b of await channelBalances(tx, { merchantId: Number(merchantId), mode })) reported.set(`${scope}|${b.channelId}|${b.currency}`, b);
      }

      let channelCount = 0;
      for (const f of figures) {
        const where = `merchant ${f.merchantId} ${f.mode} channel ${f.channelId} ${f.currency}`;
        const key = `${f.merchantId}|${f.mode}|${f.channelId}|${f.currency}`;
        const p = Object.fromEntries(Object.entries(f.postings).map(([k, v]) => [k, BigInt(v)])) as Record<keyof FigureRow["postings"], bigint>;
        const j = Object.fromEntries(Object.entries(f.journal).map(([k, v]) => [k, BigInt(v)])) as Record<keyof FigureRow["journal"], bigint>;
        const b = Object.fromEntries(Object.entries(f.business).map(([k, v]) => [k, BigInt(v)])) as Record<keyof FigureRow["business"], bigint>;
        const hasAccounts = Object.values(p).some((v) => v !== 0n) || reported.has(key);
        if (hasAccounts) channelCount++;

        // (a) The API's figures against the postings recomputed here.
        const api = reported.get(key);
        const mismatched = (Object.keys(FIGURE_NAMES) as (keyof typeof FIGURE_NAMES)[]).filter((name) => (api?.[name] ?? 0n) !== p[name]);
        if (mismatched.length) {
          differ("balances_recomputed", `${where}: ${mismatched.map((name) => `${FIGURE_NAMES[name]} ${api ? api[name] : "not reported"} reported, ${p[name]} from the postings`).join("; ")}`);
        }
        if (p.total !== 0n) differ("balances_recomputed", `${where}: its accounts sum to ${p.total}, not 0`);
        // The available figure the issue defines must be what the accounts hold.
        const defined = p.collected - p.fees - p.refunded - p.paidOut - p.pendingOut - p.disputed - p.chargedBack + p.adjustments;
        if (defined !== p.available) {
          differ("balances_recomputed", `${where}: available ${p.available}, but collected - fees - refunded - paid_out - pending_out - disputed - charged_back + adjustments is ${defined}`);
        }

        // The journal (balance transactions) against the postings.
        const journalChecks: [string, bigint, bigint][] = [
          ["sum of net", j.net, p.available + p.pendingOut],
          ["collected", j.collected, p.collected],
          ["fees", j.fees, p.fees],
          ["refunded", j.refunded, p.refunded],
          ["paid_out", j.paidOut, p.paidOut],
          ["adjustments", j.adjustments, p.adjustments],
        ];
        const journalOff = journalChecks.filter(([, fromJournal, fromPostings]) => fromJournal !== fromPostings);
        if (journalOff.length) {
          differ(
            "balances_from_journal",
            `${where}: ${journalOff.map(([name, fromJournal, fromPostings]) => `${name} ${fromJournal} by the balance transactions, ${fromPostings} by the postings${name === "sum of net" ? " (available + pending_out)" : ""}`).join("; ")}`,
          );
        }

        // (d) The business tables against the postings.
        const businessChecks: [string, bigint, bigint][] = [
          ["collected", b.collected, p.collected],
          ["refunded", b.refunded, p.refunded],
          ["paid_out", b.paidOut, p.paidOut],
          ["pending_out", b.pendingOut, p.pendingOut],
          ["disputed", b.disputed, p.disputed],
          ["charged_back", b.chargedBack, p.chargedBack],
        ];
        const businessOff = businessChecks.filter(([, fromTables, fromPostings]) => fromTables !== fromPostings);
        if (businessOff.length) {
          differ("balances_match_business", `${where}: ${businessOff.map(([name, fromTables, fromPostings]) => `${name} ${fromPostings} in the ledger, ${fromTables} by the ${tableOf(name)}`).join("; ")}`);
        }
      }
      // A balance the API reports for a channel nothing else knows of.
      const known = new Set(figures.map((f) => `${f.merchantId}|${f.mode}|${f.channelId}|${f.currency}`));
      for (const [key, b] of reported) if (!known.has(key)) differ("balances_recomputed", `channel ${b.channelId} ${b.currency}: reported by the API, absent from the ledger`);

      const [counts] = await tx.$queryRawUnsafe<{ entries: number; postings: number; accounts: number }[]>(
        `SELECT (SELECT count(*) FROM ledger_entries)::int AS entries, (SELECT count(*) FROM ledger_postings)::int AS postings, (SELECT count(*) FROM ledger_accounts)::int AS accounts`,
      );
      const order = Object.keys(LEDGER_CHECKS);
      differences.sort((x, y) => order.indexOf(x.check) - order.indexOf(y.check));
      return {
        counts: { ...counts!, channelBalances: channelCount },
        found,
        differences,
        clean: Object.values(found).every((n) => n === 0),
      };
    },
    // A large ledger takes a while to scan; the default (5 s) is for request paths.
    { timeout: 10 * 60_000, maxWait: 60_000 },
  );
}

function tableOf(figure: string): string {
  if (figure === "collected") return "completed transactions";
  if (figure === "refunded") return "completed refunds";
  if (figure === "paid_out") return "completed payouts";
  if (figure === "disputed") return "open disputes";
  if (figure === "charged_back") return "lost disputes";
  return "pending refunds and payouts";
}

/** The report as the CLI prints it: one line per check (ok, or FAIL with its differences listed under it). */
export function formatLedgerReport(result: LedgerCheckResult): string {
  const { counts } = result;
  const lines = [
    `Ledger check: ${counts.entries} entries, ${counts.postings} postings, ${counts.accounts} accounts, ${counts.channelBalances} channel balances`,
  ];
  for (const [name, meaning] of Object.entries(LEDGER_CHECKS) as [LedgerCheckName, string][]) {
    const n = result.found[name];
    lines.push(`${n === 0 ? "  ok  " : "  FAIL"}  ${meaning}${n === 0 ? "" : ` (${n} difference${n === 1 ? "" : "s"})`}`);
    const mine = result.differences.filter((d) => d.check === name);
    for (const d of mine) lines.push(`          ${name}: ${d.detail}`);
    if (mine.length < n) lines.push(`          ... and ${n - mine.length} more`);
  }
  const total = Object.values(result.found).reduce((a, b) => a + b, 0);
  lines.push(total === 0 ? "Clean: the ledger agrees with itself, the API and the business tables." : `${total} difference${total === 1 ? "" : "s"}: the ledger is not clean.`);
  return `${lines.join("\n")}\n`;
}
