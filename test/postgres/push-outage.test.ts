import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAttemptStore } from "../../src/modules/transactions/attempt-store.ts";
import { darajaGatewayEnv, type FakeDaraja, startFakeDaraja } from "../fakes/daraja.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts";
import { until } from "../support/wait.ts";

/**
 * The database goes away in the moment between Daraja accepting an STK push and the gateway recording the push's
 * request id: the payer's phone is already prompted, so losing the id would leave the payment to expire although the
 * payer paid (the callback and the status query name only that id). A short outage is waited out within the request;
 * a longer one answers 503 while the id is recorded once the database is back, and the payment completes either way.
 * And a payment whose commit's answer is lost never had its push sent: the key's retry sends it.
 */
describe("an STK push accepted just before a database outage", () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let daraja: FakeDaraja;
  let gw: TestGateway;
  let direct: pg.Pool;
  let api: ReturnType<typeof apiClient>;
  let channelId: number;

  beforeAll(async () => {
    database = await createTestDatabase();
    const url = new URL(database.databaseUrl!);
    proxy = await startTcpProxy(Number(url.port));
    url.port = String(proxy.port);
    daraja = await startFakeDaraja();
    gw = await startTestGateway({
      database: { ...database, env: { ...database.env, DATABASE_URL: url.toString() } },
      // The request cut off by the outage could not release its key: the key's lease lets its retry in.
      env: { ...darajaGatewayEnv(daraja), RATE_LIMIT_ENABLED: "false", JOBS_ENABLED: "false", IDEMPOTENCY_LEASE_MS: "3000" },
    });
    daraja.switches.callbackOrigin = gw.url;
    direct = new pg.Pool({ connectionString: database.databaseUrl!, max: 1 });
    const merchant = await gw.createMerchant();
    api = apiClient(gw.url, merchant.testKey);
    const channel = await api.post("/api/payment-channels/create", { name: "M-Pesa", provider: "mpesa", config: daraja.channelConfig() });
    expect(channel.status, channel.text).toBe(201);
    channelId = channel.body.channel.id;
  });

  afterAll(async () => {
    daraja.switches.beforeStkReply = undefined;
    await proxy?.restore().catch(() => {});
    await gw?.close();
    await direct?.end();
    await proxy?.close();
    await daraja?.close();
    await database?.drop();
  });

  /** Daraja accepts the push, then the database is cut for `ms` before the reply reaches the gateway. */
  function outageAfterNextPush(ms: number): Promise<string> {
    return new Promise((resolve) => {
      daraja.switches.beforeStkReply = async (push) => {
        daraja.switches.beforeStkReply = undefined;
        await proxy.cut();
        setTimeout(() => void proxy.restore(), ms);
        resolve(push.checkoutRequestId);
      };
    });
  }

  const push = (key: string) =>
    api.post("/v1/collections/stk", { amount: 500, phone_number: "254708374149", description: key, payment_channel_id: channelId }, { "idempotency-key": key });

  /** The attempt and payment as the database holds them (read past the proxy). */
  const recorded = async (description: string) =>
    (
      await direct.query<{ id: number; status: string; payment_request: string | null; attempt_request: string | null }>(
        `SELECT t.id, t.status::text, t.checkout_request_id AS payment_request, a.checkout_request_id AS attempt_request
           FROM transactions t JOIN transaction_attempts a ON a.transaction_id = t.id WHERE t.description = $1`,
        [description],
      )
    ).rows;

  /** The payer accepts: Daraja's callback, posted once as Daraja does (answered 200 when the push was found). */
  async function payerPays(checkoutRequestId: string, description: string) {
    const callback = await daraja.sendStkCallback(checkoutRequestId);
    expect(callback.status).toBe(200);
    const [row] = await until(() => recorded(description), (rows) => rows[0]?.status === "completed", 20_000);
    const events = await direct.query("SELECT count(*)::int AS n FROM events WHERE transaction_id = $1 AND type = 'transaction.completed'", [row!.id]);
    expect(events.rows[0].n).toBe(1);
  }

  it("waits out a short outage inside the request and answers with the push's request id", async () => {
    const accepted = outageAfterNextPush(2500);
    const res = await push("short-outage");
    const checkoutRequestId = await accepted;
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.checkout_request_id).toBe(checkoutRequestId);
    expect(await recorded("short-outage")).toEqual([expect.objectContaining({ status: "pending", payment_request: checkoutRequestId, attempt_request: checkoutRequestId })]);
    await payerPays(checkoutRequestId, "short-outage");
  });

  it("answers a longer outage with 503 and Retry-After, records the id once the database is back, and the key's retry names the same push", async () => {
    const accepted = outageAfterNextPush(14_000);
    const res = await push("long-outage");
    const checkoutRequestId = await accepted;
    expect(res.status, res.text).toBe(503);
    expect(res.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(res.body).toMatchObject({ status: "error", code: "service_unavailable" });

    // Recorded by the retries that outlived the request, without any client asking again.
    const [row] = await until(() => recorded("long-outage"), (rows) => rows[0]?.attempt_request === checkoutRequestId, 30_000);
    expect(row!.status).toBe("pending");
    // Retried as a client does: after a 503, or while the key's lease says its first request is still in progress.
    const retry = await until(() => push("long-outage"), (r) => r.status !== 503 && r.body.code !== "idempotency_key_in_use", 30_000);
    expect(retry.status, retry.text).toBe(201);
    expect(retry.body.data.reference).toBeTruthy();
    expect(await recorded("long-outage")).toHaveLength(1);
    expect(retry.body.data.checkout_request_id).toBe(checkoutRequestId);
    expect(daraja.pushes.size, "the retry sent no second push").toBe(2);
    await payerPays(checkoutRequestId, "long-outage");
  });

  it("sends on the key's retry the push of a payment whose commit went through but whose answer was lost (no push had left)", async () => {
    const pushesBefore = daraja.pushes.size;
    const lost = proxy.loseCommitAnswerAfter("transaction_attempts");
    const res = await push("lost-commit");
    await lost;
    expect(res.status, res.text).toBe(503);
    expect(res.body).toMatchObject({ status: "error", code: "service_unavailable" });
    // Committed, with its attempt, and nothing asked of Daraja.
    expect(await recorded("lost-commit")).toEqual([expect.objectContaining({ status: "pending", payment_request: null, attempt_request: null })]);
    expect(daraja.pushes.size).toBe(pushesBefore);

    const retry = await until(() => push("lost-commit"), (r) => r.status !== 503 && r.body.code !== "idempotency_key_in_use", 30_000);
    expect(retry.status, retry.text).toBe(201);
    const checkoutRequestId = retry.body.data.checkout_request_id as string;
    expect(checkoutRequestId).toBeTruthy();
    expect(daraja.pushes.size, "the retry sent the push").toBe(pushesBefore + 1);
    expect(await recorded("lost-commit")).toEqual([expect.objectContaining({ status: "pending", payment_request: checkoutRequestId, attempt_request: checkoutRequestId })]);
    // The key's answer is now the push's; asking again sends nothing more.
    const again = await push("lost-commit");
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.checkout_request_id).toBe(checkoutRequestId);
    expect(daraja.pushes.size).toBe(pushesBefore + 1);
    await payerPays(checkoutRequestId, "lost-commit");
  });

  it("a keyed push's sending is held by one request's token: asked again with it (an answer lost), still held; by another, never", async () => {
    const res = await push("take-once");
    expect(res.status, res.text).toBe(201);
    const claimOf = async () => (await direct.query<{ id: number; send_claim: string | null }>("SELECT a.id, a.send_claim FROM transaction_attempts a JOIN transactions t ON t.id = a.transaction_id WHERE t.description = 'take-once'")).rows[0]!;
    const first = await claimOf();
    expect(first.send_claim).toMatch(/^[0-9a-f-]{36}$/);
    const attempts = createAttemptStore({ prisma: gw.gateway.db.prisma, sql: gw.gateway.db.sql });
    expect(await attempts.takeSending(first.id, "another request")).toBe(false);
    expect(await attempts.takeSending(first.id, first.send_claim!)).toBe(true);
    // As a payment whose first try never sent its push: the first token to ask takes it, and keeps it.
    await direct.query("UPDATE transaction_attempts SET send_claim = 'unsent' WHERE id = $1", [first.id]);
    expect(await attempts.takeSending(first.id, "retry one")).toBe(true);
    expect(await attempts.takeSending(first.id, "retry two")).toBe(false);
    expect(await attempts.takeSending(first.id, "retry one")).toBe(true);
    expect((await claimOf()).send_claim).toBe("retry one");
    // Settled, nobody may send it.
    await direct.query("UPDATE transaction_attempts SET send_claim = 'unsent' WHERE id = $1", [first.id]);
    await daraja.sendStkCallback(res.body.data.checkout_request_id);
    await until(() => recorded("take-once"), (rows) => rows[0]?.status === "completed", 20_000);
    expect(await attempts.takeSending(first.id, "late")).toBe(false);
  });
});
