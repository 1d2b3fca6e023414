import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeDaraja, type FakeDaraja } from "../fakes/daraja.ts";
import { startFakePaystack } from "../fakes/paystack-api.ts";
import { startSmtpFake, type SmtpFake } from "../fakes/smtp.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, bearerClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { retryingUnavailable } from "../support/retry.ts";
import { until } from "../support/wait.ts";

/**
 * The go-live checklist (GET /v1/go-live, GraphQL goLive) against the real fakes: each check flips from not ok to ok
 * as the merchant fixes it, in the order a merchant would, until `ready`. The gateway starts as a first start leaves
 * it (PUBLIC_BASE_URL on localhost, no SMTP), and is restarted on the same database configured for production
 * (https, SMTP), as the checklist's fixes say.
 */
const IDS = ["public_https_url", "live_channel", "live_channel_credentials", "c2b_urls", "webhook_endpoint", "live_api_key", "owners", "mail"];
/** A public address that is valid in live mode without DNS and never called (the merchant's own URLs). */
const PUBLIC = "https://93.184.215.14";

type Check = { id: string; ok: boolean; message: string; fix: string };
type Api = ReturnType<typeof apiClient>;

const GO_LIVE = `{ goLive { ready checks { id ok message fix } } }`;

let daraja: FakeDaraja;
let paystack: Awaited<ReturnType<typeof startFakePaystack>>;
let smtp: SmtpFake;
let database: TestDatabase;
let env: Record<string, string>;
/** The running gateway: first as a first start leaves it, then restarted for production. */
let gw: TestGateway;
let merchant: TestMerchant;
let ownerToken: string;
let owner: ReturnType<typeof bearerClient>;

async function report(api: Api = apiClient(gw.url, merchant.testKey)): Promise<{ ready: boolean; checks: Check[] }> {
  // Retried on 503 + Retry-After as a client does: a loaded CI machine can find the database busy for a moment.
  const res = await retryingUnavailable(() => api.get("/v1/go-live"));
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}
const check = (r: { checks: Check[] }, id: string) => r.checks.find((c) => c.id === id)!;

async function ownerGraphql(query: string, variables: Record<string, unknown> = {}) {
  const res = await retryingUnavailable(() => owner.post("/graphql", { query, variables }));
  expect(res.status, res.text).toBe(200);
  expect(res.body.errors, res.text).toBeUndefined();
  return res.body.data;
}

const CREATE_CHANNEL = `mutation($input: CreatePaymentChannelInput!) { createPaymentChannel(input: $input) { __typename ... on PaymentChannel { databaseId } ... on Error { code message } } }`;
const UPDATE_CHANNEL = `mutation($input: UpdatePaymentChannelInput!) { updatePaymentChannel(input: $input) { __typename ... on Error { code message } } }`;
/** The verdict kept on a live channel: the last check of its credentials, and when it was made. */
async function keptCheck(channelId: number): Promise<{ ok: boolean; message: string; checkedAt: string }> {
  const { paymentChannels } = await ownerGraphql(`{ paymentChannels { databaseId credentialsCheck { ok message checkedAt } } }`);
  return paymentChannels.find((c: { databaseId: number }) => c.databaseId === channelId).credentialsCheck;
}
const CHECK = `mutation($id: Int!) { checkChannelCredentials(id: $id) { __typename ... on ChannelCredentialCheck { ok message checkedAt } ... on Error { code message } } }`;

beforeAll(async () => {
  daraja = await startFakeDaraja();
  paystack = await startFakePaystack({ secretKey: `sk_live_${"a1".repeat(20)}`, publicKey: `pk_live_${"b2".repeat(20)}` });
  smtp = await startSmtpFake();
  env = { MPESA_BASE_URL: daraja.url, PAYSTACK_BASE_URL: paystack.url, RATE_LIMIT_ENABLED: "false", JOB_POLL_INTERVAL_MS: "100" };
  database = await createTestDatabase();
  gw = await startTestGateway({ database, env });
  merchant = await gw.createMerchant("Duka la Go-Live");
  ownerToken = await gw.signIn(merchant.id, "owner", "live");
  owner = bearerClient(gw.url, ownerToken);
});

afterAll(async () => {
  await gw?.close();
  await database?.drop();
  await smtp?.close();
  await paystack?.close();
  await daraja?.close();
});

describe("the go-live checklist", () => {
  it("flips each check as the merchant fixes it, until ready; REST and GraphQL agree", async () => {
    const prisma = gw.gateway.db.prisma;
    // A merchant made by `setup` has no live key: this one's is revoked, so the check has something to flip.
    const liveKey = await prisma.apiKey.findFirstOrThrow({ where: { merchantId: merchant.id, mode: "live" } });
    await gw.gateway.services.merchants.revokeKey(liveKey.prefix);

    const first = await report();
    expect(first.ready).toBe(false);
    expect(first.checks.map((c) => c.id)).toEqual(IDS);
    expect(Object.fromEntries(first.checks.map((c) => [c.id, c.ok]))).toEqual({
      public_https_url: false,
      live_channel: false,
      live_channel_credentials: false,
      // No live channel takes C2B: nothing to register.
      c2b_urls: true,
      webhook_endpoint: false,
      live_api_key: false,
      // The signed-in owner of the setup above: one.
      owners: false,
      mail: false,
    });
    // Each check says what is wrong and where it is fixed: a dashboard page, what to set, or the call to make.
    for (const c of first.checks) {
      expect(c.message.length, c.id).toBeGreaterThan(20);
      expect(c.fix, c.id).toMatch(/^\/dashboard\/[a-z-]+$|^Set [A-Z_]+|^POST \/api\//);
    }
    expect(Object.fromEntries(first.checks.filter((c) => c.fix.startsWith("/dashboard/")).map((c) => [c.id, c.fix]))).toEqual({
      live_channel: "/dashboard/channels",
      live_channel_credentials: "/dashboard/channels",
      webhook_endpoint: "/dashboard/webhooks",
      live_api_key: "/dashboard/api-keys",
      owners: "/dashboard/users",
    });
    expect(check(first, "public_https_url").message).toMatch(/^PUBLIC_BASE_URL is http:\/\/localhost:\d+: M-Pesa posts payment results only to https addresses/);
    expect(check(first, "public_https_url").fix).toMatch(/PUBLIC_BASE_URL/);
    expect(check(first, "live_channel")).toMatchObject({ message: expect.stringMatching(/no active live channel/), fix: "/dashboard/channels" });
    expect(check(first, "owners").message).toMatch(/^Only one owner can sign in/);
    expect(check(first, "mail")).toMatchObject({ message: expect.stringMatching(/No SMTP server/), fix: expect.stringMatching(/SMTP_URL/) });

    // A live M-Pesa channel whose consumer secret Daraja refuses: checked as soon as it is saved.
    const config = { ...daraja.channelConfig(), environment: "production" };
    const created = await ownerGraphql(CREATE_CHANNEL, { input: { name: "Duka paybill", provider: "mpesa", config: { ...config, consumer_secret: "wrong-secret" } } });
    expect(created.createPaymentChannel.__typename, JSON.stringify(created)).toBe("PaymentChannel");
    const mpesaId = created.createPaymentChannel.databaseId as number;
    const refused = await until(report, (r) => /Invalid Authentication passed/.test(check(r, "live_channel_credentials").message));
    expect(check(refused, "live_channel")).toMatchObject({ ok: true, message: "Live payments go through Duka paybill (mpesa)" });
    expect(check(refused, "live_channel_credentials")).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^Duka paybill \(mpesa\): M-Pesa rejected the channel's consumer key or consumer secret \(400\.008\.01: Invalid Authentication passed\)/),
    });
    // The verdict is kept on the channel with the time it was given, and the checklist says when.
    expect(check(refused, "live_channel_credentials").message).toMatch(/ \(checked \d{4}-\d\d-\d\d \d\d:\d\d UTC\)$/);
    const refusedKept = await keptCheck(mpesaId);
    expect(refusedKept).toMatchObject({ ok: false, message: expect.stringMatching(/Invalid Authentication passed/) });
    expect(Math.abs(Date.parse(refusedKept.checkedAt) - Date.now())).toBeLessThan(10 * 60_000);
    // A paybill takes payments from the M-Pesa menu by default: its URLs must be registered.
    expect(check(refused, "c2b_urls")).toMatchObject({ ok: false, message: expect.stringMatching(/Duka paybill \(mpesa\) from the M-Pesa menu will not be recorded/) });
    // The provider call is on record for the merchant, scrubbed of the secret.
    const calls = await until(
      () => prisma.providerCall.findMany({ where: { merchantId: merchant.id, operation: "authentication" } }),
      (rows) => rows.length > 0,
    );
    expect(calls[0]).toMatchObject({ connector: "mpesa", method: "GET", path: "/oauth/v1/generate", statusCode: 400 });
    expect(calls.map((c) => `${c.requestBody} ${c.responseBody}`).join(" ")).not.toContain("wrong-secret");

    // The right secret: checked again when saved.
    const updated = await ownerGraphql(UPDATE_CHANNEL, { input: { id: mpesaId, config } });
    expect(updated.updatePaymentChannel.__typename).toBe("PaymentChannel");
    const accepted = await until(report, (r) => check(r, "live_channel_credentials").ok);
    expect(check(accepted, "live_channel_credentials").message).toBe("Duka paybill (mpesa): M-Pesa accepted the consumer key and secret (production app, shortcode 174379)");
    // Saving again checked again: the kept verdict is the new one, given later.
    const acceptedKept = await keptCheck(mpesaId);
    expect(acceptedKept).toMatchObject({ ok: true, message: "M-Pesa accepted the consumer key and secret (production app, shortcode 174379)" });
    expect(Date.parse(acceptedKept.checkedAt)).toBeGreaterThan(Date.parse(refusedKept.checkedAt));

    // A live Paystack channel with a wrong secret key: Paystack's own words come back, on demand too.
    const card = await ownerGraphql(CREATE_CHANNEL, {
      input: { name: "Duka cards", provider: "paystack", config: { public_key: paystack.publicKey, secret_key: `sk_live_${"0".repeat(40)}` } },
    });
    const paystackId = card.createPaymentChannel.databaseId as number;
    // Saving checked it too, by a job: let that verdict land first, or it replaces the on-demand one a moment later.
    await until(() => keptCheck(paystackId), (kept) => kept != null);
    const onDemand = await owner.post(`/v1/payment-channels/${paystackId}/check-credentials`, {});
    expect(onDemand.status, onDemand.text).toBe(200);
    expect(onDemand.body.data).toMatchObject({ ok: false, message: expect.stringMatching(/^Paystack refused the secret key \(HTTP 401: Invalid key\)/) });
    // Checked now, and kept with that time on the channel.
    const onDemandAt = Date.parse(onDemand.body.data.checked_at);
    expect(Math.abs(onDemandAt - Date.now())).toBeLessThan(10 * 60_000);
    expect(await keptCheck(paystackId)).toMatchObject({ ok: false, checkedAt: new Date(onDemandAt).toISOString() });
    const both = await report();
    expect(check(both, "live_channel_credentials")).toMatchObject({ ok: false, message: expect.stringMatching(/^Duka cards \(paystack\): Paystack refused the secret key \(HTTP 401: Invalid key\)/) });
    // Test keys are refused in a live channel whatever Paystack says of them.
    await ownerGraphql(UPDATE_CHANNEL, { input: { id: paystackId, config: { public_key: "pk_test_x", secret_key: "sk_test_x" } } });
    const testKeys = (await ownerGraphql(CHECK, { id: paystackId })).checkChannelCredentials;
    expect(testKeys).toMatchObject({ __typename: "ChannelCredentialCheck", ok: false, message: expect.stringMatching(/Paystack test keys/) });
    await ownerGraphql(UPDATE_CHANNEL, { input: { id: paystackId, config: paystack.channelConfig() } });
    const checked = (await ownerGraphql(CHECK, { id: paystackId })).checkChannelCredentials;
    expect(checked).toMatchObject({ __typename: "ChannelCredentialCheck", ok: true, message: "Paystack accepted the secret key" });
    expect(paystack.requests.some((r) => r.method === "GET" && r.path === "/balance")).toBe(true);
    const allAccepted = await until(report, (r) => check(r, "live_channel_credentials").ok);
    expect(check(allAccepted, "live_channel_credentials").message).toContain("Duka cards (paystack): Paystack accepted the secret key");

    // C2B URLs registered in live mode, by the signed-in live owner (the fake, unlike Daraja, takes an http callback URL).
    const registered = await ownerGraphql(
      `mutation($input: RegisterC2bUrlsInput!) { registerC2bUrls(input: $input) { __typename ... on Error { code message } } }`,
      { input: { paymentChannelId: mpesaId, confirmationUrl: `${PUBLIC}/c2b/confirm`, validationUrl: `${PUBLIC}/c2b/validate` } },
    );
    expect(registered.registerC2bUrls.__typename, JSON.stringify(registered)).toBe("RegisterC2bUrlsPayload");
    expect(daraja.registered?.ConfirmationURL).toMatch(/\/callbacks\/daraja\/[0-9a-f]+\/c2b/);
    expect(check(await report(), "c2b_urls")).toMatchObject({ ok: true, message: "C2B URLs are registered for Duka paybill (mpesa)" });

    // A live webhook endpoint: not enough until it answered a 2xx in the last 7 days.
    const endpoint = await owner.post("/v1/webhooks", { url: `${PUBLIC}/hooks` });
    expect(endpoint.status, endpoint.text).toBe(201);
    const endpointId = endpoint.body.data.id as number;
    expect(check(await report(), "webhook_endpoint")).toMatchObject({ ok: false, message: expect.stringMatching(/No live webhook endpoint answered an event with a 2xx in the last 7 days/) });
    // Live endpoints must be public https, which no loopback receiver is: the deliveries' outcomes are written as the
    // delivery job records them (a 500 now, a 200 eight days ago, then a 200 now).
    const delivered = async (status: "failed" | "succeeded", code: number, at: Date) => {
      const event = await prisma.event.create({ data: { merchantId: merchant.id, mode: "live", type: "transaction.completed", payload: {}, createdAt: at } });
      await prisma.webhookDelivery.create({
        data: { endpointId, eventId: event.id, merchantId: merchant.id, mode: "live", status, attempts: 1, lastStatusCode: code, nextAttemptAt: null, deliveredAt: status === "succeeded" ? at : null, createdAt: at },
      });
    };
    await delivered("failed", 500, new Date());
    await delivered("succeeded", 200, new Date(Date.now() - 8 * 24 * 3600_000));
    expect(check(await report(), "webhook_endpoint").ok).toBe(false);
    await delivered("succeeded", 200, new Date());
    expect(check(await report(), "webhook_endpoint")).toMatchObject({ ok: true, message: expect.stringMatching(/^https:\/\/93\.184\.215\.14\/hooks answered 200 to a live event on \d{4}-\d\d-\d\d$/) });

    // A live key, made by the live owner.
    const key = await ownerGraphql(`mutation { createApiKey { __typename ... on CreatedApiKey { secret } ... on Error { code message } } }`);
    expect(key.createApiKey.secret).toMatch(/^sk_live_/);
    expect(check(await report(), "live_api_key")).toMatchObject({ ok: true, message: "1 live API key can take payments" });

    // A second owner.
    await gw.createUser(merchant.id, "owner");
    expect(check(await report(), "owners")).toMatchObject({ ok: true, message: "2 owners can sign in" });

    // What is left is the server's own configuration: restarted with an https address and SMTP, it is ready.
    const stillLocal = await report();
    expect(stillLocal.ready).toBe(false);
    expect(stillLocal.checks.filter((c) => !c.ok).map((c) => c.id)).toEqual(["public_https_url", "mail"]);
    await gw.close();
    gw = await startTestGateway({ database, env: { ...env, PUBLIC_BASE_URL: "https://pay.duka.co.ke", SMTP_URL: smtp.url } });
    // The access token outlives the restart (signed with a key derived from the same ENCRYPTION_KEY).
    owner = bearerClient(gw.url, ownerToken);
    const ready = await report();
    expect(ready.checks.filter((c) => !c.ok)).toEqual([]);
    expect(ready.ready).toBe(true);
    expect(check(ready, "public_https_url").message).toBe("The gateway's public address is https://pay.duka.co.ke");

    // REST and GraphQL say the same, whichever credential of the merchant asks (the new live key, the live owner).
    const graphql = await apiClient(gw.url, key.createApiKey.secret).post("/graphql", { query: GO_LIVE });
    expect(graphql.body.data.goLive).toEqual(ready);
    expect(await report(owner)).toEqual(ready);
  });

  it("is each merchant's own: another merchant sees its own checklist (an STK-only channel has no C2B URLs to register) and cannot check this one's channels; viewers are refused", async () => {
    const other = await gw.createMerchant("Someone Else");
    const theirs = await report(apiClient(gw.url, other.testKey));
    expect(check(theirs, "live_channel").ok).toBe(false);
    expect(check(theirs, "webhook_endpoint").ok).toBe(false);

    const mine = await gw.gateway.db.prisma.paymentChannel.findFirstOrThrow({ where: { merchantId: merchant.id, mode: "live" } });
    const otherOwner = bearerClient(gw.url, await gw.signIn(other.id, "owner", "live"));
    // Their live M-Pesa channel says payers only ever get STK prompts ("c2b": false): no C2B URLs to register.
    const stkOnly = await otherOwner.post("/graphql", {
      query: CREATE_CHANNEL,
      variables: { input: { name: "STK only", provider: "mpesa", config: { ...daraja.channelConfig(), environment: "production", c2b: false } } },
    });
    expect(stkOnly.body.data.createPaymentChannel.__typename, stkOnly.text).toBe("PaymentChannel");
    const stkReport = await report(apiClient(gw.url, other.testKey));
    expect(check(stkReport, "live_channel").ok).toBe(true);
    expect(check(stkReport, "c2b_urls")).toMatchObject({ ok: true, message: expect.stringMatching(/^No live channel takes payments made from the M-Pesa menu/) });
    const foreign = await otherOwner.post(`/v1/payment-channels/${mine.id}/check-credentials`, {});
    expect(foreign.status, foreign.text).toBe(404);
    // A test-mode key of the same merchant checks test-mode channels only.
    const testMode = await apiClient(gw.url, merchant.testKey).post(`/v1/payment-channels/${mine.id}/check-credentials`, {});
    expect(testMode.status, testMode.text).toBe(404);

    const viewer = await gw.gateway.services.merchants.createKey(merchant.id, "live", { role: "viewer" });
    const refused = await apiClient(gw.url, viewer.plaintext).get("/v1/go-live");
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body.message).toMatch(/go-live checklist; an owner or developer can/);
  });
});
