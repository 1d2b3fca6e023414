import type pg from "pg";

/**
 * What settling a payment costs a plain pg program (bench/api.ts's and bench/bare-server.ts's baselines): one
 * interactive transaction on a pooled connection: BEGIN, the conditional UPDATE ... RETURNING, the event with
 * the row as payload, the webhook fan-out the outbox runs (with its jobs), COMMIT. Null when the row was not
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
    await client.query("COMMIT");
    return row;
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}
