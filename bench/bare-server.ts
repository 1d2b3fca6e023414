/**
 * The baseline bench/http.ts measures the gateway against: bare node:http + pg (pool 10) on the gateway's
 * own database, doing the least SQL each operation needs and nothing else (no auth, no validation):
 * one INSERT ... RETURNING for initialize, one SELECT by reference for verify, 20 rows + a count for list.
 * The two settling paths do the statements bench/api.ts's baselines do (what settling a payment must
 * write, as a plain pg program would write it: reads, then an interactive transaction):
 * - POST /stk/{token segment}: Daraja's callback body; channel by callback token, transaction by
 *   CheckoutRequestID, BEGIN, conditional UPDATE ... RETURNING, INSERT the event (the row as payload), the
 *   webhook fan-out, COMMIT (7 statements);
 * - POST /pay/{reference}: a card; transaction by reference, its channel, the charge claim (conditional
 *   UPDATE), then the same transaction as the callback's (8 statements). No card check, no charge.
 *
 *   DATABASE_URL=... MERCHANT_ID=1 CHANNEL_ID=1 PORT=4001 node --import tsx bench/bare-server.ts
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import pg from "pg";
import { settleWithPg } from "./baseline-settle.ts";

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const merchantId = Number(process.env.MERCHANT_ID);
const channelId = Number(process.env.CHANNEL_ID);
/** Lists page over a merchant that initialize does not write to (bench/http.ts seeds it). */
const listMerchantId = Number(process.env.LIST_MERCHANT_ID ?? process.env.MERCHANT_ID);
const token = (n: number) => randomBytes(n).toString("base64url").slice(0, n);

const server = createServer((req, res) => {
  const send = (status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  const fail = (error: Error) => send(500, { status: "error", message: error.message });
  const url = req.url ?? "/";
  if (req.method === "GET" && url === "/hello") return send(200, { status: "success" });
  if (req.method === "GET" && url.startsWith("/verify/")) {
    pool
      .query("SELECT id, reference, amount, status, payment_method, created_at FROM transactions WHERE reference = $1", [url.slice(8)])
      .then((r) => (r.rows[0] ? send(200, { status: "success", transaction: r.rows[0] }) : send(404, { status: "error" })), fail);
    return;
  }
  if (req.method === "GET" && url.startsWith("/list")) {
    Promise.all([
      pool.query("SELECT id, reference, amount, status, created_at FROM transactions WHERE merchant_id = $1 AND mode = 'test' ORDER BY created_at DESC, id DESC LIMIT 20", [listMerchantId]),
      pool.query("SELECT count(*)::int AS n FROM transactions WHERE merchant_id = $1 AND mode = 'test'", [listMerchantId]),
    ]).then(([rows, count]) => send(200, { status: "success", data: rows.rows, total: count.rows[0].n }), fail);
    return;
  }
  if (req.method === "POST" && (url.startsWith("/stk/") || url.startsWith("/pay/"))) {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || "{}");
      (url.startsWith("/stk/") ? stkCallback(url.slice(5), body) : cardPayment(decodeURIComponent(url.slice(5))))
        .then((answer) => send(answer ? 200 : 409, answer ?? { status: "error", message: "not pending" }), fail);
    });
    return;
  }
  if (req.method === "POST" && url === "/initialize") {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || "{}") as { amount?: number; email?: string };
      pool
        .query(
          `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, email, channel_id, updated_at)
           VALUES ($1, 'test', $2, $3, $4, 'KES', 'pending', $5, $6, now()) RETURNING id, reference, access_code, amount, status, created_at`,
          [merchantId, `bare_${token(20)}`, token(16), body.amount ?? 0, body.email ?? null, channelId],
        )
        .then((r) => send(200, { status: "success", transaction: r.rows[0] }), fail);
    });
    return;
  }
  send(404, { status: "error" });
});

type Row = Record<string, unknown> & { id: number; merchant_id: number; mode: string; amount: string };

interface StkBody {
  Body: { stkCallback: { CheckoutRequestID: string; ResultCode: number; CallbackMetadata: { Item: { Name: string; Value?: unknown }[] } } };
}

async function stkCallback(segment: string, body: StkBody) {
  const cb = body.Body.stkCallback;
  const item = (name: string) => cb.CallbackMetadata.Item.find((x) => x.Name === name)?.Value;
  const channel = await pool.query("SELECT * FROM payment_channels WHERE callback_token = $1", [Buffer.from(segment, "hex").toString("latin1")]);
  if (!channel.rows[0]) throw new Error("stk: no channel");
  const found = await pool.query<Row>("SELECT * FROM transactions WHERE channel_id = $1 AND checkout_request_id = $2 LIMIT 1", [channel.rows[0].id, cb.CheckoutRequestID]);
  const t = found.rows[0];
  if (!t || Number(t.amount) !== Number(item("Amount")) * 100) throw new Error("stk: no such transaction");
  await settleWithPg(pool, t.id, String(item("MpesaReceiptNumber")));
  return { ResultCode: 0, ResultDesc: "Accepted" };
}

async function cardPayment(reference: string) {
  const found = await pool.query<Row>("SELECT * FROM transactions WHERE reference = $1", [reference]);
  const t = found.rows[0];
  if (!t || t.status !== "pending") return null;
  const channel = await pool.query("SELECT * FROM payment_channels WHERE id = $1", [t.channel_id]);
  if (!channel.rows[0]?.is_active) throw new Error("pay: channel");
  const claimed = await pool.query(
    "UPDATE transactions SET charge_started_at = now(), updated_at = now() WHERE id = $1 AND status = 'pending' AND charge_started_at IS NULL RETURNING id",
    [t.id],
  );
  if (!claimed.rows[0]) return null;
  const row = await settleWithPg(pool, t.id, `sbx_${token(16)}`);
  return row && { status: "success", message: "Payment completed", transaction: { reference, amount: Number(row.amount), currency: row.currency, status: row.status } };
}

server.listen(Number(process.env.PORT ?? 4001), "127.0.0.1", () => process.stdout.write("bare server listening\n"));
process.on("SIGTERM", () => server.close(() => pool.end().then(() => process.exit(0))));
