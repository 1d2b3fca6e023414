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
  sources_have_entries: "every completed payment, every refund and payout (reservation), every completed or failed refund and payout has its entry",
  entries_have_sources: "no entry points at a missing source, or at one in another state, channel, currency or amount",
  balances_recomputed: "every channel's balances recomputed from the postings equal what the API reports (channelBalances)",
  balances_from_journal: "the balance transactions add up to the balances (sum of net = available + pending_out; collected, fees, refunded, paid out)",
  balances_match_business: "collected, refunded, paid_out and pending_out equal the completed payments, refunds, payouts and the ones in flight",
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
  ('payout_reservation', 'payout'), ('payout', 'payout'), ('payout_failure', 'payout'), ('adjustment', 'adjustment')) AS st(type, source_type)`;
const ACCOUNT_KINDS = "('available', 'pending_out', 'fees', 'payers', 'refunds', 'payees', 'adjustments')";
const BALANCE_TYPES = "('payment', 'refund', 'refund_failure', 'payout', 'payout_failure', 'adjustment')";

/** One problem row of a check's statement: its text, and how many rows the whole statement found. */
interface ProblemRow {
  detail: string;
  total: number;
}

async function problems(tx: Tx, sql: string, limit: number): Promise<ProblemRow[]> {
  return tx.$queryRawUnsafe<ProblemRow[]>(`SELECT detail, (count(*) OVER ())::int AS total FROM (${sql}) found ORDER BY sort_key LIMIT $1`, limit);
}

/** Entries: balanced, two legs or more, on known accounts of the entry's own merchant, mode, channel and currency, of the right source type. */
const ENTRIES_BALANCE = `
  SELECT e.id AS sort_key, 'entry ' || e.id || ' (' || e.type || ' ' || e.source_reference || '): ' || concat_ws('; ',
      CASE WHEN x.legs < 2 THEN x.legs || ' posting(s), at least 2 expected' END,
      CASE WHEN x.total <> 0 THEN 'postings sum to ' || x.total || ', not 0' END,
      CASE WHEN x.foreign_legs > 0 THEN x.foreign_legs || ' posting(s) on an account of another merchant, mode, channel or currency' END,
      CASE WHEN x.unknown_kinds > 0 THEN x.unknown_kinds || ' posting(s) on an account of unknown kind' END,
      CASE WHEN st.type IS NULL THEN 'type ' || e.type || ' with source ' || e.source_type || ' is no known rule' END) AS detail
  FROM ledger_entries e
  JOIN (
    SELECT e.id, count(p.id) AS legs, coalesce(sum(p.amount), 0) AS total,
      count(*) FILTER (WHERE a.merchant_id <> e.merchant_id OR a.mode <> e.mode OR a.channel_id <> e.channel_id OR a.currency <> e.currency) AS foreign_legs,
      count(*) FILTER (WHERE a.kind NOT IN ${ACCOUNT_KINDS}) AS unknown_kinds
    FROM ledger_entries e
    LEFT JOIN ledger_postings p ON p.entry_id = e.id
    LEFT JOIN ledger_accounts a ON a.id = p.account_id
    GROUP BY e.id
  ) x ON x.id = e.id
  LEFT JOIN ${SOURCE_OF_TYPE} ON st.type = e.type AND st.source_type = e.source_type
  WHERE x.legs < 2 OR x.total <> 0 OR x.foreign_legs > 0 OR x.unknown_kinds > 0 OR st.type IS NULL`;

/** Entries: the amount and fee shown as a balance transaction are what the postings moved. */
const ENTRIES_AGREE = `
  SELECT e.id AS sort_key, 'entry ' || e.id || ' (' || e.type || ' ' || e.source_reference || '): ' || concat_ws('; ',
      CASE WHEN x.held <> e.amount - e.fee THEN 'net ' || (e.amount - e.fee) || ' (amount ' || e.amount || ' - fee ' || e.fee || ') but its postings on available + pending_out sum to ' || x.held END,
      CASE WHEN x.fees <> e.fee THEN 'fee ' || e.fee || ' but its postings on fees sum to ' || x.fees END) AS detail
  FROM ledger_entries e
  JOIN (
    SELECT p.entry_id,
      sum(p.amount) FILTER (WHERE a.kind IN ('available', 'pending_out')) AS held_raw,
      sum(p.amount) FILTER (WHERE a.kind = 'fees') AS fees_raw
    FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id
    GROUP BY p.entry_id
  ) raw ON raw.entry_id = e.id
  CROSS JOIN LATERAL (SELECT coalesce(raw.held_raw, 0) AS held, coalesce(raw.fees_raw, 0) AS fees) x
  WHERE x.held <> e.amount - e.fee OR x.fees <> e.fee`;

/**
 * Entries: each leg as its rule gives it for the source's amount (the payment's fee is the entry's own: the
 * channel's schedule may have changed since), compared account kind by account kind with what was posted.
 */
const POSTINGS_FOLLOW_RULES = `
  WITH sourced AS (
    SELECT e.id, e.type, e.amount AS entry_amount, e.fee, coalesce(t.amount, r.amount, p.amount) AS amount
    FROM ledger_entries e
    LEFT JOIN transactions t ON e.source_type = 'transaction' AND t.id = e.source_id
    LEFT JOIN refunds r ON e.source_type = 'refund' AND r.id = e.source_id
    LEFT JOIN payouts p ON e.source_type = 'payout' AND p.id = e.source_id
    WHERE e.source_type = 'adjustment' OR coalesce(t.id, r.id, p.id) IS NOT NULL
  ), expected AS (
    SELECT s.id AS entry_id, leg.kind, leg.amount
    FROM sourced s CROSS JOIN LATERAL (VALUES
      ('payment', 'payers', -s.amount), ('payment', 'available', s.amount - s.fee), ('payment', 'fees', s.fee),
      ('refund_reservation', 'available', -s.amount), ('refund_reservation', 'pending_out', s.amount),
      ('refund', 'pending_out', -s.amount), ('refund', 'refunds', s.amount),
      ('refund_failure', 'pending_out', -s.amount), ('refund_failure', 'available', s.amount),
      ('payout_reservation', 'available', -s.amount), ('payout_reservation', 'pending_out', s.amount),
      ('payout', 'pending_out', -s.amount), ('payout', 'payees', s.amount),
      ('payout_failure', 'pending_out', -s.amount), ('payout_failure', 'available', s.amount),
      ('adjustment', 'available', s.entry_amount), ('adjustment', 'adjustments', -s.entry_amount)
    ) AS leg(type, kind, amount)
    WHERE leg.type = s.type AND leg.amount <> 0
  ), actual AS (
    SELECT p.entry_id, a.kind, sum(p.amount) AS amount
    FROM ledger_postings p JOIN ledger_accounts a ON a.id = p.account_id
    WHERE p.entry_id IN (SELECT id FROM sourced)
    GROUP BY p.entry_id, a.kind
  ), differing AS (
    SELECT coalesce(x.entry_id, y.entry_id) AS entry_id, coalesce(x.kind, y.kind) AS kind, x.amount AS expected, y.amount AS actual
    FROM expected x FULL JOIN actual y ON y.entry_id = x.entry_id AND y.kind = x.kind
    WHERE x.amount IS DISTINCT FROM y.amount
  )
  SELECT d.entry_id AS sort_key, 'entry ' || d.entry_id || ' (' || e.type || ' ' || e.source_reference || '): ' ||
      string_agg(d.kind || ' ' || coalesce(d.actual::text, 'nothing') || ' posted, ' || coalesce(d.expected::text, 'nothing') || ' by the rule', '; ' ORDER BY d.kind) AS detail
  FROM differing d JOIN ledger_entries e ON e.id = d.entry_id
  GROUP BY d.entry_id, e.type, e.source_reference`;

/** What the business tables say each source's entries must be: one row per (source, entry type). */
const EXPECTED_ENTRIES = `
  SELECT 'transaction' AS source_type, id AS source_id, 'payment' AS type, 'completed' AS state, merchant_id, mode, channel_id, currency, reference, amount FROM transactions WHERE status = 'completed' AND channel_id IS NOT NULL
  UNION ALL SELECT 'refund', id, 'refund_reservation', 'created', merchant_id, mode, channel_id, currency, reference, 0 FROM refunds
  UNION ALL SELECT 'refund', id, 'refund', 'completed', merchant_id, mode, channel_id, currency, reference, -amount FROM refunds WHERE status = 'completed'
  UNION ALL SELECT 'refund', id, 'refund_failure', 'failed', merchant_id, mode, channel_id, currency, reference, 0 FROM refunds WHERE status = 'failed'
  UNION ALL SELECT 'payout', id, 'payout_reservation', 'created', merchant_id, mode, channel_id, currency, reference, 0 FROM payouts
  UNION ALL SELECT 'payout', id, 'payout', 'completed', merchant_id, mode, channel_id, currency, reference, -amount FROM payouts WHERE status = 'completed'
  UNION ALL SELECT 'payout', id, 'payout_failure', 'failed', merchant_id, mode, channel_id, currency, reference, 0 FROM payouts WHERE status = 'failed'`;

const SOURCES_HAVE_ENTRIES = `
  SELECT x.source_id AS sort_key, x.source_type || ' ' || x.source_id || ' (' || x.reference || ', ' || x.state || '): no ' || x.type || ' entry' AS detail
  FROM (${EXPECTED_ENTRIES}) x
  WHERE NOT EXISTS (SELECT 1 FROM ledger_entries e WHERE e.source_type = x.source_type AND e.source_id = x.source_id AND e.type = x.type)`;

const ENTRIES_HAVE_SOURCES = `
  SELECT e.id AS sort_key, 'entry ' || e.id || ' (' || e.type || ' ' || e.source_reference || '): ' || CASE
      WHEN s.source_id IS NULL AND NOT EXISTS (
        SELECT 1 FROM transactions t WHERE e.source_type = 'transaction' AND t.id = e.source_id
        UNION ALL SELECT 1 FROM refunds r WHERE e.source_type = 'refund' AND r.id = e.source_id
        UNION ALL SELECT 1 FROM payouts p WHERE e.source_type = 'payout' AND p.id = e.source_id)
        THEN 'its source ' || e.source_type || ' ' || coalesce(e.source_id::text, '(none)') || ' does not exist'
      WHEN s.source_id IS NULL THEN 'its source ' || e.source_type || ' ' || e.source_id || ' is not in a state that posts ' || e.type
      ELSE concat_ws('; ',
        CASE WHEN (e.merchant_id, e.mode, e.channel_id) IS DISTINCT FROM (s.merchant_id, s.mode, s.channel_id)
          THEN 'merchant ' || e.merchant_id || ' ' || e.mode || ' channel ' || e.channel_id || ', its source says merchant ' || s.merchant_id || ' ' || s.mode || ' channel ' || s.channel_id END,
        CASE WHEN e.currency <> s.currency THEN 'currency ' || e.currency || ', its source says ' || s.currency END,
        CASE WHEN e.source_reference <> s.reference THEN 'reference ' || e.source_reference || ', its source says ' || s.reference END,
        CASE WHEN e.amount <> s.amount THEN 'amount ' || e.amount || ', its source says ' || s.amount END,
        CASE WHEN e.type NOT IN ('payment') AND e.fee <> 0 THEN 'fee ' || e.fee || ' on a ' || e.type || ' (only payments have fees)' END,
        CASE WHEN e.fee < 0 THEN 'negative fee ' || e.fee END)
    END AS detail
  FROM ledger_entries e
  LEFT JOIN (${EXPECTED_ENTRIES}) s ON s.source_type = e.source_type AND s.source_id = e.source_id AND s.type = e.type
  WHERE e.source_type <> 'adjustment' AND (s.source_id IS NULL
    OR (e.merchant_id, e.mode, e.channel_id, e.currency, e.source_reference, e.amount) IS DISTINCT FROM (s.merchant_id, s.mode, s.channel_id, s.currency, s.reference, s.amount)
    OR (e.type <> 'payment' AND e.fee <> 0) OR e.fee < 0)`;

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
      sum(balance) FILTER (WHERE kind = 'available') AS available, sum(balance) AS total
    FROM by_account GROUP BY merchant_id, mode, channel_id, currency
  ), journal AS (
    SELECT merchant_id, mode, channel_id, currency,
      sum(amount) FILTER (WHERE type = 'payment') AS collected, sum(fee) AS fees,
      -sum(amount) FILTER (WHERE type = 'refund') AS refunded, -sum(amount) FILTER (WHERE type = 'payout') AS paid_out,
      sum(amount) FILTER (WHERE type = 'adjustment') AS adjustments, sum(amount - fee) FILTER (WHERE type IN ${BALANCE_TYPES}) AS net
    FROM ledger_entries GROUP BY merchant_id, mode, channel_id, currency
  ), business AS (
    SELECT merchant_id, mode, channel_id, currency, sum(collected) AS collected, sum(refunded) AS refunded, sum(paid_out) AS paid_out, sum(pending_out) AS pending_out
    FROM (
      SELECT merchant_id, mode, channel_id, currency, amount AS collected, 0 AS refunded, 0 AS paid_out, 0 AS pending_out FROM transactions WHERE status = 'completed' AND channel_id IS NOT NULL
      UNION ALL SELECT merchant_id, mode, channel_id, currency, 0, CASE WHEN status = 'completed' THEN amount ELSE 0 END, 0, CASE WHEN status = 'pending' THEN amount ELSE 0 END FROM refunds
      UNION ALL SELECT merchant_id, mode, channel_id, currency, 0, 0, CASE WHEN status = 'completed' THEN amount ELSE 0 END, CASE WHEN status = 'pending' THEN amount ELSE 0 END FROM payouts
    ) moves GROUP BY merchant_id, mode, channel_id, currency
  ), keys AS (
    SELECT merchant_id, mode, channel_id, currency FROM postings UNION SELECT merchant_id, mode, channel_id, currency FROM journal
    UNION SELECT merchant_id, mode, channel_id, currency FROM business
  )
  SELECT k.merchant_id AS "merchantId", k.mode::text AS mode, k.channel_id AS "channelId", k.currency,
    json_build_object('collected', coalesce(p.collected, 0)::text, 'fees', coalesce(p.fees, 0)::text, 'refunded', coalesce(p.refunded, 0)::text,
      'paidOut', coalesce(p.paid_out, 0)::text, 'pendingOut', coalesce(p.pending_out, 0)::text, 'adjustments', coalesce(p.adjustments, 0)::text,
      'available', coalesce(p.available, 0)::text, 'total', coalesce(p.total, 0)::text) AS postings,
    json_build_object('collected', coalesce(j.collected, 0)::text, 'fees', coalesce(j.fees, 0)::text, 'refunded', coalesce(j.refunded, 0)::text,
      'paidOut', coalesce(j.paid_out, 0)::text, 'adjustments', coalesce(j.adjustments, 0)::text, 'net', coalesce(j.net, 0)::text) AS journal,
    json_build_object('collected', coalesce(b.collected, 0)::text, 'refunded', coalesce(b.refunded, 0)::text,
      'paidOut', coalesce(b.paid_out, 0)::text, 'pendingOut', coalesce(b.pending_out, 0)::text) AS business
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
  postings: Record<"collected" | "fees" | "refunded" | "paidOut" | "pendingOut" | "adjustments" | "available" | "total", string>;
  journal: Record<"collected" | "fees" | "refunded" | "paidOut" | "adjustments" | "net", string>;
  business: Record<"collected" | "refunded" | "paidOut" | "pendingOut", string>;
}

const FIGURE_NAMES = { collected: "collected", fees: "fees", refunded: "refunded", paidOut: "paid_out", pendingOut: "pending_out", adjustments: "adjustments", available: "available" } as const;

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
      const statements: [LedgerCheckName, string][] = [
        ["entries_balance", ENTRIES_BALANCE],
        ["entries_agree", ENTRIES_AGREE],
        ["postings_follow_rules", POSTINGS_FOLLOW_RULES],
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
        const defined = p.collected - p.fees - p.refunded - p.paidOut - p.pendingOut + p.adjustments;
        if (defined !== p.available) differ("balances_recomputed", `${where}: available ${p.available}, but collected - fees - refunded - paid_out - pending_out + adjustments is ${defined}`);

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
