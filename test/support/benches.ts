import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { darajaGatewayEnv, startFakeDaraja, type FakeDaraja, type FakeDarajaOptions } from "../fakes/daraja.ts";
import { startFakePaystack, type FakePaystack } from "../fakes/paystack-api.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../fakes/webhook-receiver.ts";
import { apiClient, startTestGateway, type HttpResult, type StartOptions, type TestGateway, type TestMerchant } from "./gateway.ts";
import { expectCleanLedger } from "./ledger-check.ts";
import { freePort } from "./local-server.ts";

/**
 * The provider benches of a test file: a loopback provider (test/fakes), the real gateway pointed at it, a merchant
 * with that provider's channel, and optionally a webhook receiver subscribed to the merchant's events. withDaraja()
 * and withPaystack() register the beforeAll that builds one and the afterAll that takes it down (after `ledger check`
 * when asked), and answer the bench, filled in once beforeAll has run; `ready` runs then, for what a file adds.
 */

/** What most bench files run with: jobs only when a test runs them, no request budgets, loopback receivers allowed. */
export const BENCH_ENV: Readonly<Record<string, string>> = { JOBS_ENABLED: "false", RATE_LIMIT_ENABLED: "false", WEBHOOK_ALLOW_PRIVATE_URLS: "true" };

type ApiClient = ReturnType<typeof apiClient>;

export interface BenchOptions extends Omit<StartOptions, "database" | "port"> {
  /** The merchant's name (a random one by default). */
  merchant?: string;
  /** The channel's name as the merchant creates it (default: the provider's). */
  channelName?: string;
  /** Start a webhook receiver and subscribe the merchant to it: one endpoint per entry (`events` omitted: all). */
  webhooks?: { path: string; events?: string[] }[];
  /** Run `ledger check` on the gateway's database before taking the bench down (a money test file). */
  cleanLedger?: boolean;
}

interface Bench<Fake> {
  fake: Fake;
  gw: TestGateway;
  merchant: TestMerchant;
  /** The merchant's test-mode key. */
  api: ApiClient;
  channelId: number;
  /** Started when `webhooks` were asked for. */
  receiver: WebhookReceiver;
  prisma(): TestGateway["gateway"]["db"]["prisma"];
  /** A channel of the bench's provider for the merchant, created over REST as the merchant would; answers its id. */
  createChannel(config: Record<string, unknown>, name?: string): Promise<number>;
  /** A channel's callback token as its callback URLs carry it (hex). */
  callbackToken(channelId: number): Promise<string>;
}

export interface DarajaBenchOptions extends BenchOptions {
  /** Options of the fake itself (credentials, shortcodes). */
  daraja?: FakeDarajaOptions;
  /**
   * MPESA_CERT_PATH at the fake's public key, and the channel with the fake's B2C initiator (b2cChannelConfig): so
   * what needs an initiator (B2C payouts, reversals, Transaction Status, Account Balance) decrypts at the fake.
   */
  initiator?: boolean;
}

export type DarajaBench = Bench<FakeDaraja> & {
  /** MPESA_CERT_PATH, when `initiator`. */
  certPath: string;
};

export interface PaystackBenchOptions extends BenchOptions {}

export type PaystackBench = Bench<FakePaystack> & {
  /** The webhook URL the channel shows (set as the fake's webhookUrl, so it posts its webhooks to the gateway). */
  webhookUrl: string;
  /** The REST answer that created the channel (a test proving no answer carries the secret key reads it too). */
  channelCreated: HttpResult;
};

/** The loopback Daraja and a gateway whose M-Pesa channels call it; the fake posts its callbacks to the gateway. */
export function withDaraja(options: DarajaBenchOptions = {}, ready?: (bench: DarajaBench) => void | Promise<void>): DarajaBench {
  const bench = {} as DarajaBench;
  let certDir: string | undefined;
  setUp(bench, options, ready, async () => {
    const { daraja, initiator, env, ...start } = options;
    bench.fake = await startFakeDaraja(daraja);
    if (initiator) bench.certPath = bench.fake.writePublicKey((certDir = mkdtempSync(join(tmpdir(), "daraja-bench-"))));
    bench.gw = await startTestGateway({ ...start, env: { ...darajaGatewayEnv(bench.fake), ...(initiator ? { MPESA_CERT_PATH: bench.certPath } : {}), ...env } });
    // The gateway listens on an ephemeral port PUBLIC_BASE_URL cannot name.
    bench.fake.switches.callbackOrigin = bench.gw.url;
    return { provider: "mpesa", config: initiator ? bench.fake.b2cChannelConfig() : bench.fake.channelConfig(), name: "M-Pesa" };
  }, async () => {
    await bench.fake?.close();
    if (certDir) rmSync(certDir, { recursive: true, force: true });
  });
  return bench;
}

/** The loopback Paystack and a gateway on a known port, so Paystack's webhooks and the payer's return reach it. */
export function withPaystack(options: PaystackBenchOptions = {}, ready?: (bench: PaystackBench) => void | Promise<void>): PaystackBench {
  const bench = {} as PaystackBench;
  setUp(bench, options, ready, async () => {
    const { env, ...start } = options;
    bench.fake = await startFakePaystack();
    const port = await freePort();
    bench.gw = await startTestGateway({ ...start, port, env: { PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, PAYSTACK_BASE_URL: bench.fake.url, ...env } });
    return { provider: "paystack", config: bench.fake.channelConfig(), name: "Paystack" };
  }, async () => {
    await bench.fake?.close();
  }, (created) => {
    bench.channelCreated = created;
    bench.webhookUrl = created.body.channel.webhook_url;
    bench.fake.webhookUrl = bench.webhookUrl;
  });
  return bench;
}

/** The hooks both benches share: the provider's part first, then merchant, channel, receiver; closed in reverse. */
function setUp<B extends Bench<{ close(): Promise<void> }>>(
  bench: B,
  options: BenchOptions,
  ready: ((bench: B) => void | Promise<void>) | undefined,
  startProvider: () => Promise<{ provider: string; config: Record<string, unknown>; name: string }>,
  stopProvider: () => Promise<void>,
  onChannel?: (created: HttpResult) => void,
): void {
  beforeAll(async () => {
    const channel = await startProvider();
    const gw = bench.gw;
    bench.prisma = () => gw.gateway.db.prisma;
    bench.merchant = await gw.createMerchant(options.merchant);
    bench.api = apiClient(gw.url, bench.merchant.testKey);
    bench.createChannel = async (config, name = channel.name) => {
      const created = await bench.api.post("/api/payment-channels/create", { name, provider: channel.provider, config });
      if (created.status !== 201) throw new Error(`creating channel ${name} answered ${created.status}: ${created.text}`);
      return created.body.channel.id as number;
    };
    bench.callbackToken = async (channelId) => Buffer.from((await bench.prisma().paymentChannel.findUniqueOrThrow({ where: { id: channelId } })).callbackToken, "utf8").toString("hex");
    const created = await bench.api.post("/api/payment-channels/create", { name: options.channelName ?? channel.name, provider: channel.provider, config: channel.config });
    if (created.status !== 201) throw new Error(`creating the bench's channel answered ${created.status}: ${created.text}`);
    bench.channelId = created.body.channel.id as number;
    onChannel?.(created);
    if (options.webhooks) {
      bench.receiver = await startWebhookReceiver();
      for (const { path, events } of options.webhooks) {
        const hook = await bench.api.post("/v1/webhooks", { url: `${bench.receiver.url}${path}`, ...(events ? { events } : {}) });
        if (hook.status !== 201) throw new Error(`subscribing ${path} answered ${hook.status}: ${hook.text}`);
      }
    }
    await ready?.(bench);
  });
  afterAll(async () => {
    await bench.gw?.close();
    await stopProvider();
    await bench.receiver?.close();
  });
  if (options.cleanLedger) afterAll(() => expectCleanLedger(bench.gw));
}
