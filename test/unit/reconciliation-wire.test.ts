import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ValidationError } from "../../src/errors.ts";
import { dayBounds } from "../../src/modules/reconciliation/service.ts";
import { createMpesaConnector } from "../../src/providers/mpesa/index.ts";
import { createMemoryTokenStore } from "../../src/providers/mpesa/token-store.ts";
import { parseAccountBalanceBody, parseAccountBalanceValue } from "../../src/providers/mpesa/wire.ts";
import { createPaystackConnector } from "../../src/providers/paystack/index.ts";
import { startFakePaystack, type FakePaystack } from "../fakes/paystack-api.ts";

/** Daraja's Account Balance Result (the documented sample's format), Paystack's transaction list as records, and the reconciliation's day. */
const SAMPLE =
  "Working Account|KES|453845.00|453845.00|0.00|0.00&Float Account|KES|0.00|0.00|0.00|0.00&Utility Account|KES|65602.5|65602.50|0.00|0.00&Charges Paid Account|KES|-660.00|-660.00|0.00|0.00";

describe("Daraja's AccountBalance result parameter", () => {
  it("reads each account's figures in cents, negatives included", () => {
    expect(parseAccountBalanceValue(SAMPLE)).toEqual([
      { account: "Working Account", currency: "KES", current: 45_384_500n, available: 45_384_500n, reserved: 0n, uncleared: 0n },
      { account: "Float Account", currency: "KES", current: 0n, available: 0n, reserved: 0n, uncleared: 0n },
      { account: "Utility Account", currency: "KES", current: 6_560_250n, available: 6_560_250n, reserved: 0n, uncleared: 0n },
      { account: "Charges Paid Account", currency: "KES", current: -66_000n, available: -66_000n, reserved: 0n, uncleared: 0n },
    ]);
  });

  it("skips what it cannot read instead of guessing", () => {
    expect(parseAccountBalanceValue("Working Account|KES|12,00|1.00&|KES|1.00|1.00&Utility Account|KES|1.005|1.00&Bad")).toEqual([]);
  });

  it("reads a whole Result: the accounts and BOCompletedTime, or the failure's code", () => {
    const body = { Result: { ResultCode: 0, ResultDesc: "ok", ResultParameters: { ResultParameter: [{ Key: "AccountBalance", Value: SAMPLE }, { Key: "BOCompletedTime", Value: 20171111111111 }] } } };
    expect(parseAccountBalanceBody(body)).toMatchObject({ state: "received", completedAt: "20171111111111" });
    expect(parseAccountBalanceBody({ Result: { ResultCode: 2001, ResultDesc: "The initiator information is invalid." } })).toEqual({ state: "failed", code: "2001", message: "The initiator information is invalid." });
    expect(() => parseAccountBalanceBody({ Result: { ResultCode: 0, ResultParameters: { ResultParameter: [] } } })).toThrow(ValidationError);
    expect(() => parseAccountBalanceBody({})).toThrow(ValidationError);
  });

  it("arrives at /balance/result/:reference below the channel's token, as a balance_result for that report", () => {
    const inbound = createMpesaConnector({ tokenStore: createMemoryTokenStore() }).inbound!;
    const at = (segment: string, path: string) => `https://pay.example.com/callbacks/${segment}/abcd${path}`;
    expect(inbound.balanceCallbackUrls!(at, "42")).toEqual({
      result: "https://pay.example.com/callbacks/daraja/abcd/balance/result/42",
      timeout: "https://pay.example.com/callbacks/daraja/abcd/balance/timeout/42",
    });
    const raw = Buffer.from(JSON.stringify({ Result: { ResultCode: 0, ResultParameters: { ResultParameter: { Key: "AccountBalance", Value: "Working Account|KES|1.00|1.00|0.00|0.00" } } } }));
    const read = inbound.read({ path: "/balance/result/:reference", params: { reference: "42" }, rawBody: raw, contentType: "application/json", headers: {}, config: () => ({}) });
    expect(read).toEqual({ kind: "balance_result", reference: "42", result: { state: "received", completedAt: null, accounts: [expect.objectContaining({ account: "Working Account", current: 100n })] } });
    expect(inbound.acknowledge(read, undefined)).toEqual({ ResultCode: 0, ResultDesc: "Accepted" });
  });
});

describe("the reconciled day", () => {
  it("is a UTC calendar day, today or earlier", () => {
    expect(dayBounds("2026-02-28")).toEqual({ date: "2026-02-28", from: new Date("2026-02-28T00:00:00Z"), to: new Date("2026-03-01T00:00:00Z") });
    for (const bad of ["2026-02-29", "2026-13-01", "26-01-01", "2026-1-1", 20260101, null, "9999-01-01"]) expect(() => dayBounds(bad)).toThrow(ValidationError);
  });
});

describe("Paystack's transaction list, read as the provider's payment records", () => {
  let fake: FakePaystack;
  beforeAll(async () => {
    fake = await startFakePaystack();
  });
  afterAll(async () => {
    await fake?.close();
  });

  it("reads success as completed, failed as failed, reversed (a chargeback lost, a refund in full) as reversed, and an unpaid one as pending", async () => {
    const statuses = { txn_ok: "success", txn_declined: "failed", txn_charged_back: "reversed", txn_unpaid: "abandoned" } as const;
    for (const [reference, status] of Object.entries(statuses)) fake.inject({ reference, amount: 150_000, currency: "KES", status });
    const rail = createPaystackConnector({ baseUrl: fake.url }).reconciliation!;
    const records = await rail.payments!({ config: fake.channelConfig(), from: new Date(Date.now() - 60_000), to: new Date(Date.now() + 60_000), providerReferences: [] });
    expect(Object.fromEntries(records.map((r) => [r.reference, r.status]))).toEqual({ txn_ok: "completed", txn_declined: "failed", txn_charged_back: "reversed", txn_unpaid: "pending" });
    expect(records.find((r) => r.reference === "txn_charged_back")).toMatchObject({ providerReference: String(fake.transactions.get("txn_charged_back")!.id), amount: 150_000n, currency: "KES" });
  });
});
