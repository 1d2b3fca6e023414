/**
 * The baseline bench/http.ts measures the gateway against: bare node:http + pg (pool 10) on the gateway's
 * own database, doing the least SQL each operation needs and nothing else (no auth, no validation):
 * one INSERT ... RETURNING for initialize, one SELECT by reference for verify, 20 rows + a count for list.
 *
 *   DATABASE_URL=... MERCHANT_ID=1 CHANNEL_ID=1 PORT=4001 node --import tsx bench/bare-server.ts
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import pg from "pg";

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

server.listen(Number(process.env.PORT ?? 4001), "127.0.0.1", () => process.stdout.write("bare server listening\n"));
process.on("SIGTERM", () => server.close(() => pool.end().then(() => process.exit(0))));
