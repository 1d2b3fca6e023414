import type { Db } from "../../db/database.ts";
import type { Mode } from "../../db/generated/prisma/client.ts";

/**
 * Reads of the ledger's tables. Writes are only ever the posting rules' statements (postings.ts), run inside
 * the money statements that cause them; nothing updates or deletes a ledger row (the database refuses).
 */

export interface LedgerScope {
  merchantId: number;
  mode: Mode;
}

/**
 * One channel's balance in one currency, from its accounts' balances (each the sum of its postings). The
 * accounts of a channel and currency sum to zero, so
 * available = collected - fees - refunded - paid_out - pending_out + adjustments.
 */
export interface ChannelBalance {
  channelId: number;
  provider: string;
  currency: string;
  /** Payments received (the payers account, sign turned). */
  collected: bigint;
  fees: bigint;
  /** Refunds completed. */
  refunded: bigint;
  /** Payouts completed. */
  paidOut: bigint;
  /** Refunds and payouts in flight. */
  pendingOut: bigint;
  /** Corrections, money in positive. */
  adjustments: bigint;
  available: bigint;
}

interface BalanceRow {
  channelId: number;
  provider: string;
  currency: string;
  kind: string;
  balance: string;
}

/** Every channel's balances (or one channel's), per currency, ordered by channel and currency. */
export async function channelBalances(db: Db, scope: LedgerScope, channelId?: number | null): Promise<ChannelBalance[]> {
  const rows = await db.$queryRawUnsafe<BalanceRow[]>(
    `SELECT a.channel_id AS "channelId", c.provider, a.currency, a.kind, coalesce(sum(p.amount), 0)::text AS balance
     FROM ledger_accounts a
     JOIN payment_channels c ON c.id = a.channel_id
     LEFT JOIN ledger_postings p ON p.account_id = a.id
     WHERE a.merchant_id = $1 AND a.mode = $2::"Mode" AND ($3::int IS NULL OR a.channel_id = $3::int)
     GROUP BY a.channel_id, c.provider, a.currency, a.kind
     ORDER BY a.channel_id, a.currency`,
    scope.merchantId,
    scope.mode,
    channelId ?? null,
  );
  const byKey = new Map<string, ChannelBalance>();
  for (const row of rows) {
    const key = `${row.channelId}|${row.currency}`;
    let b = byKey.get(key);
    if (!b) {
      b = { channelId: row.channelId, provider: row.provider, currency: row.currency, collected: 0n, fees: 0n, refunded: 0n, paidOut: 0n, pendingOut: 0n, adjustments: 0n, available: 0n };
      byKey.set(key, b);
    }
    const amount = BigInt(row.balance);
    switch (row.kind) {
      case "payers": b.collected = -amount; break;
      case "fees": b.fees = amount; break;
      case "refunds": b.refunded = amount; break;
      case "payees": b.paidOut = amount; break;
      case "pending_out": b.pendingOut = amount; break;
      case "adjustments": b.adjustments = -amount; break;
      case "available": b.available = amount; break;
    }
  }
  return [...byKey.values()];
}
