import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { darajaGatewayEnv, type FakeDaraja, startFakeDaraja } from "../fakes/daraja.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * The merchant's C2B confirmation and validation URLs are URLs the gateway calls on the merchant's
 * behalf: they go through the same guard as webhook endpoints (no loopback, private or metadata
 * addresses; https in live mode) and are called without following redirects.
 */
type Api = ReturnType<typeof apiClient>;

/** A loopback HTTP server that counts what reaches it and answers as told. */
async function startCountingServer(answer: (req: IncomingMessage, res: ServerResponse, body: string) => void = (_q, res) => res.writeHead(200).end()) {
  const hits: { path: string; body: string }[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    hits.push({ path: req.url ?? "", body });
    answer(req, res, body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    hits,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const REGISTER = `mutation Register($input: RegisterC2bUrlsInput!) {
  registerC2bUrls(input: $input) {
    __typename
    ... on Error { code message }
    ... on RegisterC2bUrlsPayload { confirmationUrl validationUrl }
  }
}`;

/** Registers through REST and through GraphQL; answers both results in a comparable shape. */
async function registerBothWays(api: Api, channelId: number, confirmationUrl: string, validationUrl: string) {
  const rest = await api.post("/api/momo/register-c2b-urls", { payment_channel_id: channelId, confirmation_url: confirmationUrl, validation_url: validationUrl });
  const gql = await api.post("/graphql", { query: REGISTER, variables: { input: { paymentChannelId: channelId, confirmationUrl, validationUrl } } });
  expect(gql.status, gql.text).toBe(200);
  expect(gql.body.errors, gql.text).toBeUndefined();
  return { rest, gql: gql.body.data.registerC2bUrls as { __typename: string; code?: string; message?: string } };
}

/** Both transports refuse with a 400 / typed ValidationError naming the field; the message is returned. */
async function expectRefused(api: Api, channelId: number, confirmationUrl: string, validationUrl: string, field: string): Promise<string[]> {
  const { rest, gql } = await registerBothWays(api, channelId, confirmationUrl, validationUrl);
  expect(rest.status, rest.text).toBe(400);
  expect(rest.body).toMatchObject({ status: "error", code: "validation_failed" });
  expect(rest.body.message.startsWith(`${field}: `), rest.body.message).toBe(true);
  expect(gql).toMatchObject({ __typename: "ValidationError", code: "validation_failed" });
  expect(gql.message!.startsWith(`${field}: `), gql.message).toBe(true);
  return [rest.body.message, gql.message!];
}

const PRIVATE_URLS = (port: string) => [
  `http://127.0.0.1:${port}/c2b`,
  "http://169.254.169.254/latest/meta-data/",
  `http://[::ffff:127.0.0.1]:${port}/c2b`,
];

let fake: FakeDaraja;
let site: Awaited<ReturnType<typeof startCountingServer>>;

/** A gateway (`env` on top of the fake Daraja's) with a merchant's sandbox channel in test mode and M-Pesa channel in live mode. */
async function startWithChannels(env: Record<string, string>) {
  const gw = await startTestGateway({ env: { ...darajaGatewayEnv(fake), RATE_LIMIT_ENABLED: "false", ...env } });
  const merchant = await gw.createMerchant();
  const test = apiClient(gw.url, merchant.testKey);
  const live = apiClient(gw.url, merchant.liveKey);
  const create = async (api: Api, provider: string, config: Record<string, unknown>) => {
    const res = await api.post("/api/payment-channels/create", { name: provider, provider, config });
    expect(res.status, res.text).toBe(201);
    return res.body.channel.id as number;
  };
  // A live channel is a signed-in live owner's to create (issue 35); the live key registers its URLs.
  const liveChannel = (await gw.createLiveChannel(merchant, { name: "mpesa", provider: "mpesa", config: fake.channelConfig() })).id;
  return { gw, test, live, testChannel: await create(test, "sandbox", {}), liveChannel };
}

beforeAll(async () => {
  fake = await startFakeDaraja();
  site = await startCountingServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ResultCode: "0", ResultDesc: "Accepted" })));
});

afterAll(async () => {
  await site?.close();
  await fake?.close();
});

describe("a gateway without ALLOW_PRIVATE_URLS", () => {
  let gw: TestGateway;
  let test: Api, live: Api, testChannel: number, liveChannel: number;
  beforeAll(async () => {
    ({ gw, test, live, testChannel, liveChannel } = await startWithChannels({ JOBS_ENABLED: "false" }));
  });

  afterAll(async () => {
    await gw?.close();
  });

  it("refuses loopback, metadata and IPv4-mapped loopback URLs in test mode, naming ALLOW_PRIVATE_URLS", async () => {
    const port = new URL(site.url).port;
    for (const bad of PRIVATE_URLS(port)) {
      const asConfirmation = await expectRefused(test, testChannel, bad, "https://93.184.215.14/validate", "confirmation_url");
      const asValidation = await expectRefused(test, testChannel, "https://93.184.215.14/confirm", bad, "validation_url");
      for (const message of [...asConfirmation, ...asValidation]) {
        expect(message).toMatch(/must not point to a private, loopback or reserved address; set ALLOW_PRIVATE_URLS=true to allow it in test mode$/);
      }
    }
    await expectRefused(test, testChannel, "http://localhost:8080/c2b", "https://93.184.215.14/validate", "confirmation_url");
    expect(await gw.gateway.db.prisma.momoC2bRegistration.count()).toBe(0);
    expect(site.hits).toHaveLength(0);
  });

  it("refuses the same URLs in live mode without naming the setting, and refuses http:// there", async () => {
    const port = new URL(site.url).port;
    for (const bad of PRIVATE_URLS(port)) {
      // As given (http), the scheme is refused first; over https, the address.
      for (const message of await expectRefused(live, liveChannel, bad, "https://93.184.215.14/validate", "confirmation_url")) {
        expect(message).toBe("confirmation_url: must use https");
      }
      for (const message of await expectRefused(live, liveChannel, "https://93.184.215.14/confirm", bad.replace("http:", "https:"), "validation_url")) {
        expect(message).toBe("validation_url: must not point to a private, loopback or reserved address");
      }
    }
    for (const message of await expectRefused(live, liveChannel, "https://93.184.215.14/confirm", "http://93.184.215.14/validate", "validation_url")) {
      expect(message).toBe("validation_url: must use https");
    }
    expect(await gw.gateway.db.prisma.momoC2bRegistration.count()).toBe(0);
    expect(fake.registered).toBeNull();
  });

  it("accepts public URLs: http in test mode, https in live mode", async () => {
    const { rest, gql } = await registerBothWays(test, testChannel, "http://93.184.215.14/confirm", "http://93.184.215.14/validate");
    expect(rest.status, rest.text).toBe(200);
    expect(gql).toMatchObject({ __typename: "RegisterC2bUrlsPayload", confirmationUrl: "http://93.184.215.14/confirm" });
    const liveOk = await registerBothWays(live, liveChannel, "https://93.184.215.14/confirm", "https://93.184.215.14/validate");
    expect(liveOk.rest.status, liveOk.rest.text).toBe(200);
    expect(liveOk.gql).toMatchObject({ __typename: "RegisterC2bUrlsPayload", validationUrl: "https://93.184.215.14/validate" });
  });

  it("a stored loopback URL (saved before the guard) is refused when the gateway calls it, not just when it is saved", async () => {
    const channel = await gw.gateway.db.prisma.paymentChannel.findUniqueOrThrow({ where: { id: testChannel } });
    await gw.gateway.db.prisma.momoC2bRegistration.update({ where: { channelId: testChannel }, data: { validationUrl: `${site.url}/validate` } });
    const own = gw.gateway.services.callbackUrls.of(channel);
    const payload = { TransactionType: "Pay Bill", TransID: "OLDREG0001", TransTime: "20231121121325", TransAmount: "5.00", BusinessShortCode: "174379", BillRefNumber: "A", MSISDN: "254708374149" };
    const res = await fetch(`${gw.url}${new URL(own.c2bValidation!).pathname}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) });
    // The registered ResponseType (Completed) decides, as when the merchant does not answer.
    expect(await res.json()).toEqual({ ResultCode: "0", ResultDesc: "Accepted" });
    expect(site.hits).toHaveLength(0);
  });
});

describe("a gateway with ALLOW_PRIVATE_URLS=true", () => {
  let gw: TestGateway;
  let test: Api, live: Api, testChannel: number, liveChannel: number;
  beforeAll(async () => {
    ({ gw, test, live, testChannel, liveChannel } = await startWithChannels({ ALLOW_PRIVATE_URLS: "true", C2B_VALIDATION_TIMEOUT_MS: "2000" }));
  });

  afterAll(async () => {
    await gw?.close();
  });

  it("lets a test-mode channel use loopback URLs, and still refuses them in live mode", async () => {
    const { rest, gql } = await registerBothWays(test, testChannel, `${site.url}/confirm`, `${site.url}/validate`);
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body.urls).toEqual({ confirmation: `${site.url}/confirm`, validation: `${site.url}/validate` });
    expect(gql).toMatchObject({ __typename: "RegisterC2bUrlsPayload", confirmationUrl: `${site.url}/confirm` });
    for (const message of await expectRefused(live, liveChannel, `${site.url.replace("http:", "https:")}/confirm`, "https://93.184.215.14/v", "confirmation_url")) {
      expect(message).not.toMatch(/ALLOW_PRIVATE_URLS/);
    }
  });

  it.each([302, 307])("does not follow a %d from the validation or confirmation URL to another port", async (status) => {
    const target = await startCountingServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ResultCode: "C2B00012", ResultDesc: "Rejected" })));
    const redirecting = await startCountingServer((req, res) => res.writeHead(status, { location: `${target.url}${req.url}` }).end());
    try {
      const reg = await test.post("/api/momo/register-c2b-urls", { payment_channel_id: testChannel, confirmation_url: `${redirecting.url}/confirm`, validation_url: `${redirecting.url}/validate` });
      expect(reg.status, reg.text).toBe(200);
      const reference = `REDIR-${status}`;
      const res = await test.post("/api/momo/simulate-c2b", { payment_channel_id: testChannel, amount: 5000, phone_number: "254708374149", reference });
      expect(res.status, res.text).toBe(200);
      // A redirect is no verdict: the registered ResponseType (Completed) accepts, so the payment is confirmed.
      expect(res.body.transaction).toMatchObject({ reference, status: "completed" });
      const forwards = () => redirecting.hits.filter((h) => h.path === "/confirm");
      await until(forwards, (f) => f.length >= 1);
      expect(redirecting.hits.map((h) => h.path)).toEqual(["/validate", "/confirm"]);
      // The 3xx counts as a failed forward: the job stays queued for a retry, with the status as its error.
      const job = await until(
        () => gw.gateway.db.prisma.job.findFirst({ where: { kind: "momo.c2b_forward", lastError: { not: null } } }),
        (j) => j !== null,
      );
      expect(job).toMatchObject({ lastError: `HTTP ${status}` });
      expect(job!.attempts).toBeGreaterThanOrEqual(1);
      // The forward's answer has been read and recorded, so a followed redirect would already have landed.
      expect(target.hits).toHaveLength(0);
      await gw.gateway.db.prisma.job.deleteMany({ where: { kind: "momo.c2b_forward" } });
    } finally {
      await redirecting.close();
      await target.close();
    }
  });
});
