import type { Config } from "./config.ts";
import type { PrismaClient, Reader } from "./db/database.ts";
import type { TransactionalSql } from "./db/sql.ts";
import type { RedisConnections } from "./infra/redis.ts";
import { createJobRunner } from "./jobs/runner.ts";
import type { Foreground } from "./jobs/foreground.ts";
import type { Logger } from "./logger.ts";
import { createCallbackService } from "./modules/callbacks/service.ts";
import { createCallbackUrls } from "./modules/channels/callback-urls.ts";
import { createChannelService } from "./modules/channels/service.ts";
import { createCustomerService } from "./modules/customers/service.ts";
import { createEventPublisher } from "./modules/events/publisher.ts";
import { createApiKeyCache } from "./modules/merchants/key-cache.ts";
import { createMerchantService } from "./modules/merchants/service.ts";
import { createBrandService } from "./modules/brand/service.ts";
import { createGoLiveService } from "./modules/go-live/service.ts";
import { createMomoService } from "./modules/momo/service.ts";
import { createPaymentLinkService } from "./modules/payment-links/service.ts";
import { createPaymentMethodService } from "./modules/payment-methods/service.ts";
import { createProviderCallService } from "./modules/provider-calls/service.ts";
import { createPayoutService } from "./modules/payouts/service.ts";
import { createReconciliationService } from "./modules/reconciliation/service.ts";
import { createRefundService } from "./modules/refunds/service.ts";
import { createDisputeService, type DisputeService } from "./modules/disputes/service.ts";
import { createBillingService } from "./modules/billing/service.ts";
import { createRetentionService } from "./modules/retention/service.ts";
import { createLedgerService } from "./modules/ledger/service.ts";
import { createTransactionService } from "./modules/transactions/service.ts";
import { createReportService } from "./modules/reports/service.ts";
import { createLoginLimiter } from "./modules/users/login-limiter.ts";
import { setPasswordHashCost } from "./modules/users/passwords.ts";
import { createUserService } from "./modules/users/service.ts";
import { createUserStates } from "./modules/users/user-states.ts";
import { createAccessTokens, signingKeyFrom } from "./modules/users/tokens.ts";
import { createWebhookService } from "./modules/webhooks/service.ts";
import { createMailService } from "./modules/mail/service.ts";
import { createConnectors } from "./providers/index.ts";
import { createPushLimiter } from "./rate-limit/pushes.ts";
import type { SecretBox } from "./security/encryption.ts";
import type { GatewayMetrics } from "./metrics/registry.ts";
import { createMerchantUrls } from "./security/outbound.ts";

export interface ServiceDeps {
  prisma: PrismaClient;
  sql: TransactionalSql;
  /** Where lists, reports and dashboards' figures read (Database.read: a replica when there is one); the primary when unset. */
  read?: Reader;
  secrets: SecretBox;
  /** The key under the SecretBox: access tokens are signed with a key derived from it unless JWT_SECRET is set. */
  encryptionKey: Buffer;
  config: Pick<Config, "publicBaseUrl" | "momo" | "paystack" | "refunds" | "disputes" | "billing" | "jobs" | "webhooks" | "allowPrivateUrls" | "checkoutChargeLeaseMs" | "checkout" | "pushLimits" | "apiKeyCacheTtlMs" | "auth" | "retention" | "mail">;
  /** Shares events and provider tokens (Daraja) across instances when set. */
  redis: RedisConnections | undefined;
  logger: Logger;
  /** The API's load in this process, for the job runner to step back while it is busy (the server's; none for the CLI). */
  foreground?: Foreground;
  /** Counts status changes, webhook attempts and refused sign-ins when set (the server's /metrics). */
  metrics?: GatewayMetrics;
}

/**
 * The domain services, built once per process and shared by every transport, with the one job
 * runner they register their deferred work with (started by the server, not here: the CLI only enqueues).
 */
export function createServices(deps: ServiceDeps) {
  const { prisma, logger, config } = deps;
  const publisher = createEventPublisher(deps.redis);
  const { metrics } = deps;
  const read = deps.read ?? { prisma, sql: deps.sql };
  const jobs = createJobRunner({ prisma, logger, pollIntervalMs: config.jobs.pollIntervalMs, leaseMs: config.jobs.leaseMs, foreground: deps.foreground });
  const providerCalls = createProviderCallService({ prisma, read, logger });
  const connectors = createConnectors({
    mpesaBaseUrl: config.momo.mpesaBaseUrl,
    mpesaCertPath: config.momo.mpesaCertPath,
    sandboxStkDelayMs: config.momo.sandboxStkDelayMs,
    sandboxRefundDelayMs: config.refunds.sandboxDelayMs,
    sandboxDisputeDelayMs: config.disputes.sandboxDelayMs,
    sandboxDisputeDueMs: config.disputes.sandboxDueMs,
    paystackBaseUrl: config.paystack.baseUrl,
    paystackTimeoutMs: config.paystack.timeoutMs,
    paystackRefundCheckAfterMs: config.refunds.paystackCheckAfterMs,
    reversalResultOverdueMs: config.refunds.reversalResultOverdueMs,
    redis: deps.redis,
    recordCall: providerCalls.record,
  });
  const callbackUrls = createCallbackUrls(connectors, config.publicBaseUrl);
  const channels = createChannelService(prisma, deps.sql, deps.secrets, callbackUrls.webhookUrl, { connectors, jobs });
  const merchantUrls = createMerchantUrls({ allowPrivateUrls: config.allowPrivateUrls });
  const customers = createCustomerService(prisma, read.prisma);
  const paymentMethods = createPaymentMethodService({ prisma, secrets: deps.secrets, encryptionKey: deps.encryptionKey, customers, logger });
  // Made after the transactions service, which asks it what a card payment's completion queues.
  let disputes: DisputeService | undefined;
  const transactions = createTransactionService({
    prisma,
    sql: deps.sql,
    read,
    channels,
    customers,
    connectors,
    publisher,
    jobs,
    metrics: metrics?.statusCounter,
    logger,
    publicBaseUrl: config.publicBaseUrl,
    cardChargeLeaseMs: config.checkoutChargeLeaseMs,
    checkout: config.checkout,
    collection: {
      reconcileAfterMs: config.momo.stkCallbackOverdueMs,
      queryBackoffMs: config.momo.stkQueryBackoffMs,
      lifetimeMs: config.momo.stkLifetimeMs,
    },
    hosted: { verifyAfterMs: config.paystack.verifyAfterMs, abandonAfterMs: config.paystack.abandonAfterMs },
    stkCallbackUrl: (channel) => callbackUrls.of(channel).collection ?? "",
    jobsOnCardPaid: (channel, payment) => disputes?.jobsOnCompleted(channel, payment) ?? [],
    paymentMethods,
    pushLimits: createPushLimiter({ ...config.pushLimits, redis: deps.redis, onRefused: metrics?.rateLimited }),
  });
  const payouts = createPayoutService({
    prisma,
    sql: deps.sql,
    read,
    channels,
    connectors,
    publisher,
    jobs,
    metrics: metrics?.statusCounter,
    logger,
    resultOverdueMs: config.momo.payoutResultOverdueMs,
    // Providers that post no per-request results (Paystack: webhooks) are given none.
    callbackUrls: (channel) => {
      const urls = callbackUrls.of(channel);
      return { result: urls.payoutResult ?? "", timeout: urls.payoutTimeout ?? "", statusResult: (reference) => urls.payoutStatusResult?.(reference) ?? "" };
    },
  });
  const refunds = createRefundService({ prisma, sql: deps.sql, read, channels, transactions, connectors, publisher, jobs, metrics: metrics?.statusCounter, logger, refundCallbackUrls: callbackUrls.refundsOf });
  disputes = createDisputeService({ prisma, sql: deps.sql, read, channels, transactions, connectors, publisher, jobs, logger, checkEveryMs: config.disputes.checkEveryMs });
  const billing = createBillingService({
    prisma,
    sql: deps.sql,
    read: read.prisma,
    customers,
    paymentMethods,
    transactions,
    jobs,
    publisher,
    logger,
    retryScheduleMs: config.billing.retryScheduleMs,
    cancelUnpaid: config.billing.cancelUnpaid,
  });
  const momo = createMomoService({ prisma, channels, transactions, connectors, jobs, merchantUrls, callbackUrls, config: config.momo, logger });
  const reconciliations = createReconciliationService({ prisma, read, channels, connectors, transactions, callbackUrls, jobs, logger });
  const tokens = createAccessTokens(signingKeyFrom(config.auth.jwtSecret, deps.encryptionKey), config.auth.accessTokenTtlSeconds);
  setPasswordHashCost(config.auth.passwordHashCost);
  const userStates = createUserStates({ prisma, ttlMs: config.apiKeyCacheTtlMs, redis: deps.redis, logger });
  const keyCache = createApiKeyCache({ ttlMs: config.apiKeyCacheTtlMs, redis: deps.redis, logger });
  const users = createUserService({
    prisma,
    tokens,
    userStates,
    refreshTokenTtlMs: config.auth.refreshTokenTtlMs,
    loginLimiter: createLoginLimiter({
      failuresPerEmail: config.auth.loginFailuresPerEmail,
      failuresPerIp: config.auth.loginFailuresPerIp,
      windowSeconds: config.auth.loginFailureWindowSeconds,
      redis: deps.redis,
      onRefused: metrics?.rateLimited,
    }),
  });
  const brand = createBrandService({ prisma, sql: deps.sql });
  const reports = createReportService({ prisma, read });
  const merchants = createMerchantService(prisma, { keyCache });
  const webhooks = createWebhookService({ prisma, sql: deps.sql, read, secrets: deps.secrets, jobs, config: config.webhooks, merchantUrls, logger, onAttempt: metrics?.webhookAttempt });
  const goLive = createGoLiveService({ config: { publicBaseUrl: config.publicBaseUrl, smtpConfigured: config.mail.smtp !== undefined }, channels, momo, webhooks, merchants, users });
  const mail = createMailService({ prisma, jobs, logger, config: { mail: config.mail, publicBaseUrl: config.publicBaseUrl }, transactions, refunds, customers, brand, reports });
  return {
    publisher,
    tokens,
    mail,
    users,
    userStates,
    keyCache,
    jobs,
    connectors,
    providerCalls,
    merchants,
    goLive,
    brand,
    channels,
    customers,
    paymentMethods,
    transactions,
    payouts,
    refunds,
    disputes,
    billing,
    paymentLinks: createPaymentLinkService({ prisma, channels, connectors, transactions, publicBaseUrl: config.publicBaseUrl, payerKey: deps.encryptionKey, payerCookieMs: config.checkout.expiryMs }),
    ledger: createLedgerService({ prisma, read }),
    reports,
    reconciliations,
    retention: createRetentionService({ prisma, jobs, settings: config.retention, leaseMs: config.jobs.leaseMs, logger }),
    momo,
    callbackUrls,
    callbacks: createCallbackService({ channels, connectors, transactions, payouts, refunds, disputes, momo, reconciliations, logger }),
    webhooks,
  };
}

export type Services = ReturnType<typeof createServices>;
