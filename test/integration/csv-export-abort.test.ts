import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSandboxMerchant, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { expectNothingMoreWithin, until, untilSteady } from "../support/wait.ts";

/**
 * Issue 42: a CSV export streams (keyset batches, each one statement, read only when the client has taken the last)
 * and one cut by its client mid-stream gives everything back at once: no further batch is read, no connection
 * stays checked out of the pool or busy in PostgreSQL (pg_stat_activity), and the merchant's export slot is free
 * (EXPORTS_PER_MERCHANT=1 here, so the next export is served rather than refused). Over real HTTP, both exports.
 */
let gw: TestGateway;
let merchant: TestMerchant & { channelId: number };
/** Tens of megabytes of CSV per export, far more than the sockets buffer, so an unread export stalls mid-stream. */
const ROWS = 40_000;
const BATCH = 1000;
/** The export's statements (only they select the keyset column). */
const EXPORT_STATEMENT = 'created_at::text AS "createdAtKey"';
const exportStatements: string[] = [];
let admin: pg.Client | undefined;

beforeAll(async () => {
  gw = await startTestGateway({
    // No job runner: its poll takes a pooled connection every few seconds, and "the pool is idle" here must mean the export's.
    env: { RATE_LIMIT_ENABLED: "false", EXPORTS_PER_MERCHANT: "1", JOBS_ENABLED: "false" },
    onQuery: (sql) => {
      if (sql.includes(EXPORT_STATEMENT)) exportStatements.push(sql);
    },
  });
  merchant = await createSandboxMerchant(gw);
  await gw.gateway.db.sql.query(
    `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, email, description, channel_id, created_at, updated_at)
     SELECT $1::int, 'test', 'abort_' || i, 'ac_abort_' || i, 100 + i, 'KES', 'completed', 'bulk' || i || '@example.com', repeat('bulk export row ', 20),
       $2::int, now() - i * interval '1 second', now()
     FROM generate_series(1, ${ROWS}) i`,
    [merchant.id, merchant.channelId],
  );
  await gw.gateway.db.sql.query(
    `INSERT INTO ledger_entries (merchant_id, mode, channel_id, currency, type, source_type, source_id, source_reference, amount, fee, note, created_at)
     SELECT $1::int, 'test', $2::int, 'KES', 'payment', 'transaction', i, 'abort_' || i, 100 + i, 3, repeat('bulk export row ', 20), now() - i * interval '1 second'
     FROM generate_series(1, ${ROWS}) i`,
    [merchant.id, merchant.channelId],
  );
  if (gw.gateway.db.backend === "postgres") {
    admin = new pg.Client({ connectionString: gw.database.env.DATABASE_URL });
    await admin.connect();
  }
});
afterAll(async () => {
  for (const request of opened) request.destroy();
  await admin?.end();
  await gw?.close();
});

const opened: ClientRequest[] = [];

/** A GET of an export that reads nothing: the server's writes stall once the sockets' buffers are full. */
function openExport(path: string): Promise<{ response: IncomingMessage; request: ClientRequest }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${gw.url}${path}`, { headers: { "x-api-key": merchant.testKey } }, (response) => {
      response.pause();
      resolve({ response, request });
    });
    request.on("error", reject);
    opened.push(request);
    request.end();
  });
}

/** The gateway's sessions on PostgreSQL that are running or holding a transaction open (none when all are back in the pool). */
async function busySessions(): Promise<{ state: string; query: string }[]> {
  if (!admin) return [];
  const { rows } = await admin.query<{ state: string; query: string }>(
    `SELECT state, left(query, 120) AS query FROM pg_stat_activity
     WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND state <> 'idle'`,
  );
  return rows;
}

const poolIdle = () => {
  const stats = gw.gateway.db.poolStats?.();
  return stats ? stats.idle === stats.total && stats.waiting === 0 : true;
};

describe.each([
  ["transactions", "/v1/reports/transactions.csv"],
  ["balance transactions", "/v1/reports/balance-transactions.csv"],
])("the %s CSV export cut off by its client", (_name, path) => {
  it("reads no batch the client has not taken, and once the client goes away stops reading and holds no connection or slot", async () => {
    const before = exportStatements.length;
    const { response, request } = await openExport(path);
    expect(response.statusCode).toBe(200);
    // Backpressure: with the client reading nothing, the export stalls after what the sockets buffer. Not every
    // batch is read, and while it waits, no connection is held (batches are one statement each).
    // Stalled means no batch read for 2 s in a row (a shorter gap can be a loaded machine's pause, not the stall).
    await untilSteady(() => exportStatements.length, 2000);
    await expectNothingMoreWithin(1000, () => exportStatements.length, "no batch read while the client reads nothing");
    const stalledAt = exportStatements.length - before;
    expect(stalledAt).toBeGreaterThan(0);
    expect(stalledAt).toBeLessThan(ROWS / BATCH);
    expect(await busySessions()).toEqual([]);
    expect(poolIdle()).toBe(true);

    // The client aborts mid-stream.
    request.destroy();
    await until(() => busySessions(), (rows) => rows.length === 0);
    await until(poolIdle, (idle) => idle);
    await expectNothingMoreWithin(500, () => exportStatements.length, "no batch read after the client went away");
    // The slot is free: the merchant's one export at a time is served again, and this one reads to its end.
    const again = await fetch(`${gw.url}${path}`, { headers: { "x-api-key": merchant.testKey } });
    expect(again.status).toBe(200);
    const text = await again.text();
    expect(text.split("\r\n").filter(Boolean)).toHaveLength(ROWS + 1);
    expect(await busySessions()).toEqual([]);
    expect(poolIdle()).toBe(true);
  });
});
