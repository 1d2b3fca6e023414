import type pg from "pg";

/**
 * What settling a payment costs a plain pg program (bench/api.ts's and bench/bare-server.ts's baselines): one
 * interactive transaction on a pooled connection: BEGIN, the conditional UPDATE ... RETURNING, the event with
 * the row as payload, the webhook fan-out the outbox runs (with its jobs), the ledger's payment entry (fee from
 * the channel's schedule) and its postings, COMMIT. Null when the row was not
 * pending (rolled back, nothing written).
 */
export async function settleWithPg(pool: pg.Pool, id: number, providerReference: string): Promise<Record<string, unknown> | null> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    const updated = await client.query(
      `UPDATE transactions SET status = 'completed', provider_reference = $2, completed_at = now(), updated_at = now()
       WHERE id = $1 AND status = 'pending' RETURNING *`,
      [id, providerReference],
    );
    const row = updated.rows[0];
    if (!row) {
      await client.query("ROLLBACK");
      return null;
    }
    await client.query("INSERT INTO events (merchant_id, mode, type, transaction_id, payload) VALUES ($1, $2, 'transaction.completed', $3, $4)", [
      row.merchant_id,
      row.mode,
      row.id,
      JSON.stringify({ transaction: { ...row, amount: Number(row.amount) } }),
    ]);
    await client.query(
      `WITH endpoints AS (SELECT id FROM webhook_endpoints WHERE merchant_id = $1 AND mode = $2 AND enabled AND (cardinality(events) = 0 OR $3 = ANY(events))),
       deliveries AS (INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, mode) SELECT id, currval('events_id_seq'), $1, $2 FROM endpoints
                      ON CONFLICT (endpoint_id, event_id) DO NOTHING RETURNING id)
       INSERT INTO jobs (kind, payload) SELECT 'webhook.deliver', jsonb_build_object('deliveryId', id) FROM deliveries`,
      [row.merchant_id, row.mode, "transaction.completed"],
    );
    await client.query(
      `WITH e AS (
         INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee)
         SELECT $1::int, $2::"Mode", c.id, $4::text, 'payment', 'transaction', $5::int, $6::text, $7::bigint,
           round($7::bigint * c.fee_percent_bps / 10000.0)::bigint + c.fee_fixed
         FROM payment_channels c WHERE c.id = $3::int RETURNING id, fee)
       INSERT INTO ledger_postings (entry_id, account_id, amount)
       SELECT e.id, ledger_account($1::int, $2::"Mode", $3::int, $4::text, v.kind), v.amount FROM e,
         LATERAL (VALUES ('payers', -$7::bigint), ('available', $7::bigint - e.fee), ('fees', e.fee)) v(kind, amount) WHERE v.amount <> 0`,
      [row.merchant_id, row.mode, row.channel_id, row.currency, row.id, row.reference, row.amount],
    );
    await client.query("COMMIT");
    return row;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}
