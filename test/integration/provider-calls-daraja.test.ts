import { describe, expect, it } from "vitest";
import { withDaraja, type DarajaBench } from "../support/benches.ts";
import { assertNoSecrets } from "../support/provider-call-secrets.ts";

/**
 * Every provider call on record, end to end (issue 36): an STK push through the public API, against the loopback
 * Daraja, leaves its exchanges in provider_calls, scrubbed, on the transaction's page. Needs the connectors' HTTP
 * helper (src/providers/http.ts) handing exchanges to the sink inside the core's scope.
 */
let { fake, gw, api, channelId } = {} as DarajaBench;

withDaraja({ env: { JOBS_ENABLED: "false", RATE_LIMIT_ENABLED: "false" } }, (bench) => {
  ({ fake, gw, api, channelId } = bench);
});

describe("an STK push on record", () => {
  it("its exchange with Daraja is on its transaction, scrubbed", async () => {
    const push = await api.post("/api/momo/stk-push", { amount: 150000, phone_number: "254708374149", payment_channel_id: channelId, reference: "INV-1" });
    expect(push.status, push.text).toBe(200);
    const reference = push.body.transaction.reference as string;
    await gw.gateway.services.providerCalls.flush();

    const res = await api.get(`/v1/transactions/${reference}/provider-calls`);
    expect(res.status, res.text).toBe(200);
    const stk = res.body.data.filter((c: { operation: string }) => c.operation === "stk_push");
    expect(stk).toHaveLength(1);
    expect(stk[0]).toMatchObject({ connector: "mpesa", method: "POST", path: "/mpesa/stkpush/v1/processrequest", status_code: 200, error: null });
    expect(JSON.parse(stk[0].request_body)).toMatchObject({ BusinessShortCode: fake.shortcode, Amount: 1500 });
    expect(JSON.parse(stk[0].response_body)).toMatchObject({ ResponseCode: "0", CheckoutRequestID: push.body.transaction.checkout_request_id });

    // Every row the push left (the OAuth token's too, if recorded) gives no credential away.
    const rows = await gw.gateway.db.prisma.providerCall.findMany();
    expect(rows.length).toBeGreaterThanOrEqual(1);
    assertNoSecrets(rows, { known: [fake.consumerSecret, fake.passkey, Buffer.from(`${fake.consumerKey}:${fake.consumerSecret}`).toString("base64")] });
  });
});
