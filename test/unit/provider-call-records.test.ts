import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withProviderCallScope, type ProviderCallRecord, type ProviderCallScope } from "../../src/providers/call-record.ts";
import { createMpesaConnector } from "../../src/providers/mpesa/index.ts";
import { createMemoryTokenStore } from "../../src/providers/mpesa/token-store.ts";
import { createPaystackConnector } from "../../src/providers/paystack/index.ts";
import type { RefundRequest } from "../../src/providers/types.ts";
import { startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { startFakePaystack } from "../fakes/paystack-api.ts";

/**
 * Both real connectors, against their loopback fakes, with a call sink: every HTTP exchange is recorded once, with
 * the operation it does and the scope the core set, and no record holds a secret, a password, a token or a card code.
 */
type Recorded = { record: ProviderCallRecord; scope: ProviderCallScope | undefined };
const sink = (into: Recorded[]) => (record: ProviderCallRecord, scope: ProviderCallScope | undefined) => void into.push({ record, scope });
const everything = (records: Recorded[]) => JSON.stringify(records);

describe("M-Pesa's calls on record", () => {
  let fake: FakeDaraja;
  const records: Recorded[] = [];
  beforeAll(async () => {
    fake = await startFakeDaraja();
    // Nothing is posted back: only the calls made are looked at.
    Object.assign(fake.switches, { b2cNoResult: true, reversalNoResult: true, statusNoResult: true, balanceNoResult: true });
  });
  afterAll(async () => fake?.close());

  it("records each call (the token fetch included) with its scope, and none holds a credential", async () => {
    const connector = createMpesaConnector({
      tokenStore: createMemoryTokenStore(),
      baseUrlOverride: fake.url,
      certPath: fake.writePublicKey(mkdtempSync(join(tmpdir(), "daraja-cert-"))),
      recordCall: sink(records),
    });
    const config = fake.b2cChannelConfig();
    const callbacks = { result: "https://pay.gateway.test/r", timeout: "https://pay.gateway.test/t", statusResult: "https://pay.gateway.test/s" };
    await withProviderCallScope({ merchantId: 1, transactionId: 11 }, async () => {
      const push = await connector.momo!.stkPush({ config, amount: 100n, currency: "KES", phoneNumber: "254708374149", accountReference: "A", description: "B", callbackUrl: "https://pay.gateway.test/x" });
      await connector.momo!.stkQuery({ config, checkoutRequestId: push.checkoutRequestId });
    });
    await withProviderCallScope({ merchantId: 1, payoutId: 22 }, () =>
      connector.payouts!.send({ config, reference: "po_1", providerRequestId: "ocid-po-1", amount: 150_000n, currency: "KES", phoneNumber: "254708374149", commandId: "BusinessPayment", remarks: "Pay", resultUrl: callbacks.result, timeoutUrl: callbacks.timeout }),
    );
    const refund: RefundRequest = {
      config, reference: "re_1", providerRequestId: "ocid-re-1", amount: 150_000n, currency: "KES", merchantNote: null, customerNote: null, createdAt: new Date(), providerReference: null, callbacks,
      payment: { reference: "txn_1", amount: 150_000n, currency: "KES", paymentMethod: "momo_stk", providerReference: "SFX1234567", phoneNumber: "+254708374149" },
    };
    await withProviderCallScope({ merchantId: 1, refundId: 33 }, () => connector.refunds!.send(refund));
    await connector.momo!.registerC2bUrls({ config, confirmationUrl: "https://pay.gateway.test/c", validationUrl: "https://pay.gateway.test/v", responseType: "Completed" });
    await connector.reconciliation!.requestBalance!({ config, resultUrl: callbacks.result, timeoutUrl: callbacks.timeout });

    expect(records.map(({ record }) => record.operation)).toEqual(["authentication", "stk_push", "stk_query", "payout", "reversal", "c2b_url_registration", "account_balance_request"]);
    expect(records.map(({ scope }) => scope)).toEqual([
      { merchantId: 1, transactionId: 11 },
      { merchantId: 1, transactionId: 11 },
      { merchantId: 1, transactionId: 11 },
      { merchantId: 1, payoutId: 22 },
      { merchantId: 1, refundId: 33 },
      undefined,
      undefined,
    ]);
    expect(records[0]!.record).toMatchObject({ connector: "mpesa", method: "GET", path: "/oauth/v1/generate", statusCode: 200 });
    expect(records[1]!.record).toMatchObject({ method: "POST", path: "/mpesa/stkpush/v1/processrequest", statusCode: 200, error: null });
    expect(JSON.parse(records[0]!.record.responseBody!)).toMatchObject({ access_token: "[redacted]" });
    expect(JSON.parse(records[1]!.record.requestBody!)).toMatchObject({ Password: "[redacted]", Amount: 1, PhoneNumber: "254708374149" });
    expect(JSON.parse(records[3]!.record.requestBody!)).toMatchObject({ SecurityCredential: "[redacted]", Amount: 1500 });
    const all = everything(records);
    for (const secret of [fake.consumerSecret, fake.passkey, fake.initiatorPassword, "Bearer", "Basic "]) expect(all).not.toContain(secret);
  });
});

describe("Paystack's calls on record", () => {
  let fake: Awaited<ReturnType<typeof startFakePaystack>>;
  const records: Recorded[] = [];
  beforeAll(async () => {
    fake = await startFakePaystack();
  });
  afterAll(async () => fake?.close());

  it("records each call with its scope; the secret key and the card's authorization code never appear", async () => {
    const connector = createPaystackConnector({ baseUrl: fake.url, recordCall: sink(records) });
    const config = fake.channelConfig();
    await withProviderCallScope({ merchantId: 2, transactionId: 44 }, async () => {
      await connector.hosted!.start({ config, reference: "txn-ps-1", amount: 250_000n, currency: "NGN", email: "payer@example.com", callbackUrl: "https://pay.gateway.test/back", metadata: { transaction_id: 44 } });
      await fake.pay("txn-ps-1");
      const verified = await connector.hosted!.verify({ config, reference: "txn-ps-1" });
      expect(verified.outcome.state).toBe("completed");
    });
    await connector.payouts!.send({ config, reference: "po_paystack_record_1", providerRequestId: "po_paystack_record_1", amount: 150_000n, currency: "KES", phoneNumber: "254708374149", commandId: "BusinessPayment", remarks: "Pay", resultUrl: "", timeoutUrl: "" });

    expect(records.map(({ record }) => [record.operation, record.method, record.path])).toEqual([
      ["payment_initialization", "POST", "/transaction/initialize"],
      ["payment_verification", "GET", "/transaction/verify/txn-ps-1"],
      ["payout_recipient", "POST", "/transferrecipient"],
      ["payout", "POST", "/transfer"],
    ]);
    expect(records.slice(0, 2).map(({ scope }) => scope)).toEqual([{ merchantId: 2, transactionId: 44 }, { merchantId: 2, transactionId: 44 }]);
    const verify = JSON.parse(records[1]!.record.responseBody!);
    expect(verify.data.authorization).toMatchObject({ authorization_code: "[redacted]", last4: "4081" });
    const all = everything(records);
    expect(all).not.toContain(config.secret_key);
    expect(all).not.toMatch(/AUTH_[a-z0-9]/i);
  });
});
