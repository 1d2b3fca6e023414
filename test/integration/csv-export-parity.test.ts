import { expect, it } from "vitest";
import type { Principal } from "../../src/auth.ts";
import { localDay } from "../../src/days.ts";
import { csvLine } from "../../src/modules/ledger/csv.ts";
import { TRANSACTION_CSV_COLUMNS } from "../../src/modules/transactions/export.ts";
import { transactionWhere, newestFirst } from "../../src/modules/transactions/store.ts";
import { createSandboxMerchant, startTestGateway } from "../support/gateway.ts";

/**
 * The transactions export reads its rows with a plain-SQL statement of its own (store.ts exportBatches): its CSV must
 * be byte for byte what the same rows read through Prisma (transactionWhere, newest first) and written cell by cell
 * give, for every filter: nulls, formulas, quotes, phones, fees, and the merchant's days across a DST change at
 * midnight (America/Santiago, April 2024).
 */
it("the transactions CSV is what Prisma's rows make of it, byte for byte, whatever the filters", async () => {
  const gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
  try {
    const m = await createSandboxMerchant(gw);
    await gw.gateway.db.sql.query(`UPDATE merchants SET timezone = 'America/Santiago' WHERE id = $1`, [m.id]);
    await gw.gateway.db.sql.query(
      `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, amount_refunded, currency, status, payment_method, email, phone_number, description, client_reference, provider_reference, failure_code, failure_reason, fee, channel_id, created_at, updated_at, completed_at)
       SELECT $1::int, 'test', 'cmp_' || i, 'ac_cmp_' || i, 100 + i, i % 7, 'KES', (ARRAY['completed','failed','pending'])[1 + i % 3]::"TransactionStatus",
         CASE WHEN i % 4 = 0 THEN NULL ELSE 'card' END, CASE WHEN i % 5 = 0 THEN NULL ELSE 'p' || i || '@example.com' END,
         CASE WHEN i % 6 = 0 THEN NULL ELSE '+2547' || lpad(i::text, 8, '0') END,
         (ARRAY['plain', '=1+1', 'a,b', 'x;=y', ' -3', 'quote "q"', E'line\\nbreak', NULL, '0712345678', '@me'])[1 + i % 10],
         CASE WHEN i % 3 = 0 THEN '+' || i END, CASE WHEN i % 2 = 0 THEN 'R' || i END, CASE WHEN i % 3 = 1 THEN 'declined' END, CASE WHEN i % 3 = 1 THEN 'The card, declined' END,
         CASE WHEN i % 3 = 0 THEN i % 50 END, $2::int,
         timestamp with time zone '2024-04-07 05:00:00+00' - i * interval '37 minutes 13.457 seconds', now(), CASE WHEN i % 3 = 0 THEN now() - i * interval '1 minute' END
       FROM generate_series(1, 3500) i`,
      [m.id, m.channelId],
    );
    const principal: Principal = { merchantId: m.id, mode: "test", role: "owner", userId: null, keyId: 1, keyPrefix: "sk_test_x" };
    for (const filters of [{}, { status: "completed" }, { dateFrom: "2024-03-01", dateTo: "2024-04-02" }, { search: "p31@example.com" }, { search: "cmp_42" }, { search: "+254700000061" }]) {
      const exported = await gw.gateway.services.transactions.exportCsv(principal, filters as any);
      let text = "";
      for await (const chunk of exported.chunks) text += chunk;
      const zone = "America/Santiago";
      const rows = await gw.gateway.db.prisma.transaction.findMany({ where: transactionWhere(principal, { ...filters, timeZone: zone } as any), orderBy: newestFirst });
      let old = csvLine(TRANSACTION_CSV_COLUMNS);
      for (const t of rows) old += csvLine([
        t.id, t.reference, t.status, t.amount, t.amountRefunded, t.currency, t.paymentMethod, t.channelId, t.email, t.phoneNumber,
        t.clientReference, t.providerReference, t.description, t.failureCode, t.failureReason, t.createdAt.toISOString(), t.completedAt?.toISOString() ?? null,
        localDay(t.createdAt, zone), zone, t.fee, t.fee === null ? null : t.amount - t.fee,
      ]);
      expect(rows.length, JSON.stringify(filters)).toBeGreaterThan(0);
      expect(text, JSON.stringify(filters)).toBe(old);
    }
  } finally {
    await gw.close();
  }
});
