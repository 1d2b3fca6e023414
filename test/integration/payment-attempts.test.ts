import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { withDaraja, type DarajaBench } from "../support/benches.ts";
import { jobsFallDue } from "../support/wait.ts";

/**
 * Issue 36, payment and attempt: every STK push, from the API or the checkout page, is a row of
 * transaction_attempts, found by its callback in one lookup (channel + the provider's request id) and settled
 * with its payment in one status change; API pushes still pending at upgrade get their attempt from the migration.
 */
const PHONE = "254708374149";
const ACK = { ResultCode: 0, ResultDesc: "Accepted" };

let statements: string[] = [];
let { fake, gw, api, channelId } = {} as DarajaBench;
const prisma = () => gw.gateway.db.prisma;

withDaraja(
  { merchant: "Attempts Ltd", env: { JOBS_ENABLED: "false", STK_CALLBACK_OVERDUE_MS: "1", STK_QUERY_BACKOFF_MS: "1", RATE_LIMIT_ENABLED: "false" }, onQuery: (sql) => statements.push(sql) },
  (bench) => {
    ({ fake, gw, api, channelId } = bench);
  },
);

async function apiPush(amount = 150_000) {
  const res = await api.post("/api/momo/stk-push", { amount, phone_number: PHONE, payment_channel_id: channelId });
  expect(res.status, res.text).toBe(200);
  return res.body.transaction as { id: number; reference: string; checkout_request_id: string };
}

async function pagePush() {
  const init = await api.post("/api/transactions/initialize", { amount: 150_000, currency: "KES", email: "payer@example.com", payment_channel_id: channelId });
  expect(init.status, init.text).toBe(200);
  const reference = init.body.reference as string;
  const pushed = await fetch(`${gw.url}/payment/checkout/${reference}/mpesa`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ phone: `+${PHONE}` }) });
  expect(pushed.status, await pushed.clone().text()).toBe(202);
  const t = await prisma().transaction.findUniqueOrThrow({ where: { reference } });
  const attempt = await prisma().transactionAttempt.findFirstOrThrow({ where: { transactionId: t.id } });
  return { id: t.id, reference, checkoutRequestId: attempt.checkoutRequestId! };
}

const attemptsOf = (transactionId: number) =>
  prisma().transactionAttempt.findMany({ where: { transactionId }, orderBy: { id: "asc" }, select: { method: true, origin: true, status: true, checkoutRequestId: true, providerReference: true, phoneNumber: true } });
const settlingEvent = (transactionId: number) => prisma().event.findFirstOrThrow({ where: { transactionId, type: { in: ["transaction.completed", "transaction.failed"] } } });

describe("an API push and a page push", () => {
  it("are both attempts on one table, each callback found in one lookup and settled with its payment", async () => {
    const fromApi = await apiPush();
    const fromPage = await pagePush();
    expect(await attemptsOf(fromApi.id)).toEqual([
      { method: "mpesa", origin: "api", status: "pending", checkoutRequestId: fromApi.checkout_request_id, providerReference: null, phoneNumber: `+${PHONE}` },
    ]);
    expect(await attemptsOf(fromPage.id)).toEqual([
      { method: "mpesa", origin: "checkout", status: "pending", checkoutRequestId: fromPage.checkoutRequestId, providerReference: null, phoneNumber: `+${PHONE}` },
    ]);

    for (const [push, receipt] of [[{ id: fromApi.id, checkoutRequestId: fromApi.checkout_request_id }, "ATTAPI0001"], [fromPage, "ATTPAGE001"]] as const) {
      statements = [];
      expect((await fake.sendStkCallback(push.checkoutRequestId, { receipt })).body).toEqual(ACK);
      // One read of the attempts table finds the push; no read of the payment before its status change.
      expect(statements.filter((sql) => /FROM transaction_attempts a WHERE a\.channel_id = \$1 AND a\.checkout_request_id = \$2/.test(sql))).toHaveLength(1);
      expect(statements.filter((sql) => /^\s*SELECT\b[\s\S]*\bFROM transactions WHERE/.test(sql))).toEqual([]);
      expect(await attemptsOf(push.id)).toMatchObject([{ status: "succeeded", providerReference: receipt }]);
      expect(await prisma().transaction.findUniqueOrThrow({ where: { id: push.id } })).toMatchObject({ status: "completed", paymentMethod: "momo_stk", providerReference: receipt });
    }
    // The settling event shows a page attempt; an API push's keeps its published shape, with no attempt.
    expect((await settlingEvent(fromPage.id)).payload).toMatchObject({ transaction: { attempt: { method: "mpesa", code: null, reason: null, number: 1 } } });
    expect((await settlingEvent(fromApi.id)).payload).not.toHaveProperty("transaction.attempt");
  });

  it("a receipt another payment holds settles neither the attempt nor its payment; the push's own receipt then settles both", async () => {
    const first = await apiPush();
    const second = await apiPush();
    await fake.sendStkCallback(first.checkout_request_id, { receipt: "ATTTAKEN01" });
    expect((await fake.sendStkCallback(second.checkout_request_id, { receipt: "ATTTAKEN01" })).body).toEqual(ACK);
    expect(await attemptsOf(second.id)).toMatchObject([{ status: "pending", providerReference: null }]);
    expect((await prisma().transaction.findUniqueOrThrow({ where: { id: second.id } })).status).toBe("pending");
    await fake.sendStkCallback(second.checkout_request_id, { receipt: "ATTOWN0002" });
    expect(await attemptsOf(second.id)).toMatchObject([{ status: "succeeded", providerReference: "ATTOWN0002" }]);
  });

  it("a provider's late success overrides the gateway's expiry on the attempt, and is recorded on it only", async () => {
    const t = await apiPush();
    await prisma().transaction.update({ where: { id: t.id }, data: { createdAt: new Date(Date.now() - 10 * 60_000) } });
    await jobsFallDue(prisma(), { kind: "transaction.reconcile", payload: { path: ["transactionId"], equals: t.id } });
    await gw.gateway.services.jobs.runDueJobs(["transaction.reconcile"]);
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).toMatchObject({ status: "failed", failureCode: "1019" });
    expect(await attemptsOf(t.id)).toMatchObject([{ status: "failed" }]);
    await fake.sendStkCallback(t.checkout_request_id, { receipt: "ATTLATE001" });
    expect(await attemptsOf(t.id)).toMatchObject([{ status: "succeeded", providerReference: "ATTLATE001" }]);
    expect((await prisma().transaction.findUniqueOrThrow({ where: { id: t.id } })).status).toBe("failed");
  });
});

describe("a C2B payment (the provider reports it on its own)", () => {
  async function confirmationUrl() {
    const row = await prisma().paymentChannel.findUniqueOrThrow({ where: { id: channelId } });
    return `${gw.url}/callbacks/daraja/${Buffer.from(row.callbackToken, "utf8").toString("hex")}/c2b/confirmation`;
  }
  const confirmation = (transId: string) => ({
    TransactionType: "Pay Bill", TransID: transId, TransTime: "20261128121325", TransAmount: "12.50", BusinessShortCode: fake.shortcode,
    BillRefNumber: "INV-C2B", MSISDN: PHONE, FirstName: "Jane",
  });
  const deliver = async (url: string, transId: string) => {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(confirmation(transId)) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ResultCode: 0, ResultDesc: "Success" });
  };
  /** The payments recorded for a receipt, each with its attempts. */
  const recorded = (receipt: string) =>
    prisma().transaction.findMany({
      where: { providerReference: receipt },
      select: { status: true, paymentMethod: true, amount: true, attempts: { select: { method: true, origin: true, status: true, detail: true, phoneNumber: true, providerReference: true, channelId: true, code: true, settledAt: true } } },
    });
  const oneSucceededAttempt = (receipt: string) => [
    {
      status: "completed", paymentMethod: "momo_c2b", amount: 1250n,
      attempts: [{ method: "mpesa", origin: "c2b", status: "succeeded", detail: "2547*****149", phoneNumber: `+${PHONE}`, providerReference: receipt, channelId, code: null, settledAt: expect.any(Date) }],
    },
  ];

  it("is one payment and its one attempt, born succeeded; the same confirmation again changes nothing", async () => {
    const url = await confirmationUrl();
    await deliver(url, "C2BATT0001");
    expect(await recorded("C2BATT0001")).toEqual(oneSucceededAttempt("C2BATT0001"));
    await deliver(url, "C2BATT0001");
    expect(await recorded("C2BATT0001")).toEqual(oneSucceededAttempt("C2BATT0001"));
  });

  it("delivered several times at once, is still one payment and one attempt", async () => {
    const url = await confirmationUrl();
    await Promise.all(Array.from({ length: 5 }, () => deliver(url, "C2BATT0002")));
    expect(await recorded("C2BATT0002")).toEqual(oneSucceededAttempt("C2BATT0002"));
  });

  it("recorded before the upgrade, gets its attempt from the migration, once", async () => {
    const backfill = readFileSync(new URL("../../prisma/migrations/20261128204416_c2b_attempts/migration.sql", import.meta.url), "utf8")
      .split(";")
      .find((statement) => statement.includes('INSERT INTO "transaction_attempts"'))!;
    await deliver(await confirmationUrl(), "C2BATT0003");
    // As before the upgrade: C2B payments had no attempt row.
    await prisma().transactionAttempt.deleteMany({ where: { providerReference: "C2BATT0003" } });
    await prisma().$executeRawUnsafe(backfill);
    await prisma().$executeRawUnsafe(backfill);
    const [upgraded] = await recorded("C2BATT0003");
    const [settled] = upgraded!.attempts;
    expect(upgraded).toEqual(oneSucceededAttempt("C2BATT0003")[0]);
    expect(settled!.settledAt).toEqual((await prisma().transaction.findFirstOrThrow({ where: { providerReference: "C2BATT0003" } })).createdAt);
  });
});

describe("the upgrade", () => {
  /** The migration's backfill, as it runs at upgrade. */
  const backfill = readFileSync(new URL("../../prisma/migrations/20261128195011_payment_attempts_everywhere/migration.sql", import.meta.url), "utf8")
    .split(";")
    .find((statement) => statement.includes('INSERT INTO "transaction_attempts"'))!;

  it("gives an API push still pending its attempt, so its callback lands; settled payments get none", async () => {
    const pending = await apiPush(2_000);
    const settled = await apiPush(3_000);
    await fake.sendStkCallback(settled.checkout_request_id);
    // As before the upgrade: API pushes had no attempt row.
    await prisma().transactionAttempt.deleteMany({ where: { transactionId: { in: [pending.id, settled.id] } } });
    await prisma().$executeRawUnsafe(backfill);
    expect(await attemptsOf(pending.id)).toEqual([
      { method: "mpesa", origin: "api", status: "pending", checkoutRequestId: pending.checkout_request_id, providerReference: null, phoneNumber: `+${PHONE}` },
    ]);
    expect(await attemptsOf(settled.id)).toEqual([]);
    // Run twice (a migration retried), it adds nothing.
    await prisma().$executeRawUnsafe(backfill);
    expect(await attemptsOf(pending.id)).toHaveLength(1);

    expect((await fake.sendStkCallback(pending.checkout_request_id, { receipt: "ATTBACK001" })).body).toEqual(ACK);
    expect(await prisma().transaction.findUniqueOrThrow({ where: { id: pending.id } })).toMatchObject({ status: "completed", providerReference: "ATTBACK001" });
    expect(await attemptsOf(pending.id)).toMatchObject([{ status: "succeeded", providerReference: "ATTBACK001" }]);
  });
});
