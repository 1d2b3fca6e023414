import { randomBytes } from "node:crypto";
import { scopeOf, type Principal } from "../../auth.ts";
import type { PrismaClient, Sql } from "../../db/database.ts";
import type { ChannelCredentialCheck, PaymentChannel, Prisma } from "../../db/generated/prisma/client.ts";
import { GatewayError, NotFoundError, ValidationError } from "../../errors.ts";
import { connectorConfigSchemas, isProviderName, isTestProvider, listedProviderNames, type ProviderName } from "../../providers/registry.ts";
import { enqueue } from "../../jobs/store.ts";
import type { JobRunner } from "../../jobs/runner.ts";
import { withProviderCallScope } from "../../providers/call-record.ts";
import type { Connectors } from "../../providers/index.ts";
import type { SecretBox } from "../../security/encryption.ts";

export type { ChannelCredentialCheck, PaymentChannel };

/** Shows a live channel's new credentials to its provider after they are saved (create or update). */
export const CHECK_CREDENTIALS_JOB = "channels.check_credentials";

/**
 * The provider's fee on each payment: min(round(amount * feePercentBps / 10000) + feeFixed, feeCap), computed by the
 * SQL function payment_fee() alone (when a payment completes, and for previewFee), and written on the payment then.
 */
export interface FeeSchedule {
  /** Basis points of the amount, 0 to 10000. */
  feePercentBps?: number | null;
  /** Minor units, 0 to 10^12. */
  feeFixed?: bigint | number | null;
  /** Minor units, 0 to 10^12: the fee never exceeds it. Null leaves it as it is (none on create); `removeFeeCap` removes it. */
  feeCap?: bigint | number | null;
}

export interface CreateChannelInput extends FeeSchedule {
  name: string;
  provider: string;
  config?: unknown;
}

export interface UpdateChannelInput extends FeeSchedule {
  name?: string | null;
  /** True: the fee has no cap any more (feeCap must then be absent). */
  removeFeeCap?: boolean | null;
  /** Replaces the whole config; validated against the channel's provider. */
  config?: unknown;
}

const MAX_FEE_FIXED = 10n ** 12n;

function minorUnits(value: bigint | number, field: string): bigint {
  const amount = typeof value === "bigint" ? value : Number.isSafeInteger(value) ? BigInt(value) : -1n;
  if (amount < 0n || amount > MAX_FEE_FIXED) throw new ValidationError(field, "must be an integer from 0 to 10^12 (minor units)");
  return amount;
}

/** The fee schedule's columns that the input sets (absent fields are left as they are, or 0 and no cap on create). */
export function validateFeeSchedule(input: FeeSchedule): { feePercentBps?: number; feeFixed?: bigint; feeCap?: bigint } {
  const out: { feePercentBps?: number; feeFixed?: bigint; feeCap?: bigint } = {};
  if (input.feePercentBps != null) {
    if (!Number.isInteger(input.feePercentBps) || input.feePercentBps < 0 || input.feePercentBps > 10_000) {
      throw new ValidationError("fee_percent_bps", "must be an integer from 0 to 10000 (basis points: 150 is 1.5%)");
    }
    out.feePercentBps = input.feePercentBps;
  }
  if (input.feeFixed != null) out.feeFixed = minorUnits(input.feeFixed, "fee_fixed");
  if (input.feeCap != null) out.feeCap = minorUnits(input.feeCap, "fee_cap");
  return out;
}

const MAX_NAME_LENGTH = 100;

function validateName(value: string | null | undefined): string {
  const name = value?.trim();
  if (!name) throw new ValidationError("name", "is required");
  if (name.length > MAX_NAME_LENGTH) throw new ValidationError("name", `must be at most ${MAX_NAME_LENGTH} characters`);
  return name;
}

/** Test providers first, then the real ones alphabetically (the registry's order). */
const providerList = listedProviderNames.join(", ");

function validateProvider(value: string | null | undefined): ProviderName {
  if (!value || !isProviderName(value)) throw new ValidationError("provider", `must be one of ${providerList}`);
  return value;
}

/**
 * A test provider (the registry says which) approves public test cards and simulates pushes: in live mode
 * it would turn test cards into "completed" live payments, so its channels are test-mode only.
 */
const liveProviderList = listedProviderNames.filter((name) => !isTestProvider(name)).join(", ");

function isTestProviderInLive(mode: string, provider: string): boolean {
  return mode === "live" && isTestProvider(provider);
}

/** Whether a channel may take or send money in its own mode (a live test-provider row predates the rule). */
function isUsableChannel(channel: Pick<PaymentChannel, "mode" | "provider">): boolean {
  return !isTestProviderInLive(channel.mode, channel.provider);
}

function validateProviderForMode(principal: Principal, value: string | null | undefined): ProviderName {
  const provider = validateProvider(value);
  if (isTestProviderInLive(principal.mode, provider)) {
    throw new ValidationError("provider", `${provider} is for test mode only; in live mode use one of ${liveProviderList}`);
  }
  return provider;
}

/** A live channel of a test provider, created before the rule, is refused as a 400, never used. */
function assertUsable(channel: PaymentChannel, field: string): PaymentChannel {
  if (!isUsableChannel(channel)) {
    throw new ValidationError(field, `payment channel ${channel.id} is a ${channel.provider} channel, which is for test mode only; use a channel of another provider (${liveProviderList})`);
  }
  return channel;
}

function valueAt(root: unknown, path: PropertyKey[]): unknown {
  let value = root;
  for (const key of path) value = value && typeof value === "object" ? (value as Record<PropertyKey, unknown>)[key] : undefined;
  return value;
}

/** The provider's credentials, checked by its schema; the first problem is reported as config.<field>. */
function validateConfig(provider: ProviderName, input: unknown): unknown {
  const config = input ?? {};
  const parsed = connectorConfigSchemas[provider].safeParse(config);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  if (issue.path.length === 0) throw new ValidationError("config", "must be an object");
  const field = `config.${issue.path.join(".")}`;
  if (issue.code === "invalid_type" || issue.code === "invalid_value") {
    // zod does not echo the input, so "missing" is decided by looking at the value itself.
    if (valueAt(config, issue.path) === undefined) throw new ValidationError(field, "is required");
    if (issue.code === "invalid_type") throw new ValidationError(field, `must be a ${issue.expected}`);
  }
  throw new ValidationError(field, issue.message);
}

/**
 * Provider callback paths carry the channel's token hex-encoded: base64url text could by chance spell a
 * word Daraja refuses in URLs ("exe", "sql", ...); hex cannot.
 */
export const encodeCallbackToken = (token: string) => Buffer.from(token, "utf8").toString("hex");

export function decodeCallbackToken(segment: string): string | null {
  if (!/^(?:[0-9a-f]{2}){1,128}$/.test(segment)) return null;
  const token = Buffer.from(segment, "hex").toString("latin1");
  return /^[A-Za-z0-9_-]+$/.test(token) ? token : null;
}

/**
 * Channels read on the hottest money paths, kept for a second: every STK result finds its channel by callback
 * token, every checkout card payment by id, and every initialize (and payment link) resolves the channel it names
 * or the merchant's default, with the merchant's currency. Channels change rarely, and each of those requests does
 * only one to three other statements (initialize's resolution was a quarter of its CPU, in the gateway and in
 * PostgreSQL alike: bench/README.md). A change made through this instance clears them at once; one made through
 * another instance (new credentials, a deactivation, a new default) reaches these paths here within
 * RECENT_CHANNEL_TTL_MS. Only channels that exist, and resolutions that found an active one, are kept (an unknown
 * token or id, or a merchant with no usable channel, always asks the database), so the size is bounded by the
 * channels there are (twice, per mode, for a resolution naming none).
 */
const RECENT_CHANNEL_TTL_MS = 1_000;

export interface PaymentChannelResolution {
  channel: PaymentChannel;
  defaultCurrency: string;
}

class RecentChannels {
  readonly #entries = new Map<string, { channel: PaymentChannel; until: number }>();
  readonly #resolutions = new Map<string, { resolution: PaymentChannelResolution; until: number }>();
  #generation = 0;

  /** What resolvePaymentChannelAndCurrency found for this merchant, mode and channel id (or none: the default). */
  resolution(key: `${number}:${string}:${number | "default"}`, find: () => Promise<PaymentChannelResolution>): Promise<PaymentChannelResolution> {
    const entry = this.#resolutions.get(key);
    if (entry && entry.until > Date.now()) return Promise.resolve(entry.resolution);
    const generation = this.#generation;
    return find().then((resolution) => {
      // Read before a change this instance made meanwhile (clear() ran): answered, but not kept.
      if (generation === this.#generation) this.#resolutions.set(key, { resolution, until: Date.now() + RECENT_CHANNEL_TTL_MS });
      return resolution;
    });
  }

  get(key: `token:${string}` | `id:${number}`): PaymentChannel | null {
    const entry = this.#entries.get(key);
    if (!entry) return null;
    if (entry.until > Date.now()) return entry.channel;
    this.#entries.delete(key);
    return null;
  }

  /** Keeps the channel under both of its keys. */
  keep(channel: PaymentChannel): PaymentChannel {
    const entry = { channel, until: Date.now() + RECENT_CHANNEL_TTL_MS };
    this.#entries.set(`token:${channel.callbackToken}`, entry);
    this.#entries.set(`id:${channel.id}`, entry);
    return channel;
  }

  clear(): void {
    this.#entries.clear();
    this.#resolutions.clear();
    this.#generation++;
  }
}

type ChannelRow = Omit<PaymentChannel, "createdAt" | "updatedAt" | "feeFixed" | "feeCap"> & { createdAt: Date | string; updatedAt: Date | string; feeFixed: string; feeCap: string | null };

/** Every column of payment_channels `c`, as Prisma's model has it. */
const CHANNEL_COLUMNS = `c.id, c.merchant_id AS "merchantId", c.mode, c.name,
  c.provider, c.config_encrypted AS "configEncrypted", c.is_active AS "isActive", c.is_default AS "isDefault",
  c.fee_percent_bps AS "feePercentBps", c.fee_fixed::text AS "feeFixed", c.fee_cap::text AS "feeCap",
  c.callback_token AS "callbackToken", c.created_at AS "createdAt", c.updated_at AS "updatedAt"`;

const channelFromRow = (row: ChannelRow): PaymentChannel => ({
  ...row,
  feeFixed: BigInt(row.feeFixed),
  feeCap: row.feeCap === null ? null : BigInt(row.feeCap),
  createdAt: new Date(row.createdAt),
  updatedAt: new Date(row.updatedAt),
});

/**
 * The channel a payment uses (the one asked for, or the merchant's active default) and the merchant's
 * default currency, in one statement: initialize's first round trip.
 */
const PAYMENT_CHANNEL_AND_CURRENCY = `SELECT m.default_currency AS "defaultCurrency", ${CHANNEL_COLUMNS}
FROM merchants m
LEFT JOIN LATERAL (
  SELECT * FROM payment_channels c
  WHERE c.merchant_id = m.id AND c.mode = $2::"Mode" AND (CASE WHEN $3::int IS NULL THEN c.is_default AND c.is_active ELSE c.id = $3::int END)
  LIMIT 1
) c ON true
WHERE m.id = $1`;

/**
 * `webhookUrl` is the URL a merchant pastes into a provider's dashboard for a channel (null for providers
 * whose URLs the gateway hands out itself); the channel's connector lays it out (callback-urls.ts).
 */
export interface ChannelCredentialChecking {
  /** The connectors whose `credentials` capability asks the provider. */
  connectors: Connectors;
  /** Runs the check queued when a live channel's credentials are saved; without it, checks are made on demand only. */
  jobs?: JobRunner;
}

export function createChannelService(
  prisma: PrismaClient,
  sql: Sql,
  secrets: SecretBox,
  webhookUrl: (channel: Pick<PaymentChannel, "provider" | "callbackToken">) => string | null = () => null,
  checking?: ChannelCredentialChecking,
) {
  const scope = scopeOf;
  const recent = new RecentChannels();

  /**
   * Asks the channel's provider whether it accepts the credentials and keeps the verdict (replacing the last one).
   * A provider that needs none (the sandbox) accepts them by definition.
   */
  async function checkCredentialsOf(channel: PaymentChannel): Promise<ChannelCredentialCheck> {
    const connector = checking?.connectors.for(channel);
    const verdict = connector?.credentials
      ? await withProviderCallScope({ merchantId: channel.merchantId }, () =>
          connector.credentials!.verify({ config: secrets.decryptJson(channel.configEncrypted), live: channel.mode === "live" }),
        )
      : connector
        ? { ok: true, message: `${channel.provider} channels need no credentials` }
        : { ok: false, message: `This build has no ${channel.provider} provider` };
    const data = { ok: verdict.ok, message: verdict.message.slice(0, 500), checkedAt: new Date() };
    return prisma.channelCredentialCheck.upsert({ where: { channelId: channel.id }, create: { channelId: channel.id, ...data }, update: data });
  }

  checking?.jobs?.register<{ channelId: number }>({
    kind: CHECK_CREDENTIALS_JOB,
    maxAttempts: 3,
    async run({ channelId }) {
      const channel = await prisma.paymentChannel.findUnique({ where: { id: channelId } });
      if (channel) await checkCredentialsOf(channel);
    },
  });

  /**
   * New credentials make the last verdict meaningless: it is dropped in the same database transaction, and a live
   * channel's are shown to the provider by a job right after commit (the go-live checklist reads the verdict).
   */
  async function credentialsSaved(tx: Prisma.TransactionClient, channel: PaymentChannel): Promise<void> {
    await tx.channelCredentialCheck.deleteMany({ where: { channelId: channel.id } });
    if (channel.mode === "live" && checking?.jobs) await enqueue(tx, CHECK_CREDENTIALS_JOB, { channelId: channel.id }, { key: { channelId: channel.id } });
  }
  const nudgeChecks = () => checking?.jobs?.nudge();

  /**
   * Serializes default-flag changes per merchant: without the row lock two concurrent transactions
   * would each clear the (not yet visible) other default and both commit is_default = true.
   */
  async function lockMerchant(tx: Prisma.TransactionClient, merchantId: number) {
    await tx.$queryRaw`SELECT id FROM merchants WHERE id = ${merchantId} FOR UPDATE`;
  }

  async function clearDefault(tx: Prisma.TransactionClient, principal: Principal) {
    await tx.paymentChannel.updateMany({ where: { ...scope(principal), isDefault: true }, data: { isDefault: false } });
  }

  async function getChannel(principal: Principal, id: number): Promise<PaymentChannel> {
    const channel = await prisma.paymentChannel.findFirst({ where: { id, ...scope(principal) } });
    if (!channel) throw new NotFoundError(`Payment channel ${id}`);
    return channel;
  }

  async function resolveUncached(merchantId: number, mode: Principal["mode"], channelId: number | null): Promise<PaymentChannelResolution> {
    const [row] = await sql.query<ChannelRow & { defaultCurrency: string; id: number | null }>(PAYMENT_CHANNEL_AND_CURRENCY, [merchantId, mode, channelId]);
    if (!row) throw new NotFoundError("Merchant");
    const { defaultCurrency, ...columns } = row;
    if (columns.id === null) {
      if (channelId != null) throw new NotFoundError(`Payment channel ${channelId}`);
      throw new ValidationError("payment_channel_id", "is required: the merchant has no active default payment channel");
    }
    const channel = channelFromRow({ ...columns, id: columns.id });
    if (!channel.isActive) throw new GatewayError("channel_inactive", `Payment channel ${channelId} is inactive`);
    return { channel: assertUsable(channel, "payment_channel_id"), defaultCurrency };
  }

  return {
    /**
     * A new channel is active and the merchant's default; the previous default loses the flag in the
     * same database transaction, so there is never a moment with two defaults.
     */
    async createChannel(principal: Principal, input: CreateChannelInput): Promise<PaymentChannel> {
      const name = validateName(input.name);
      const provider = validateProviderForMode(principal, input.provider);
      const configEncrypted = secrets.encryptJson(validateConfig(provider, input.config));
      const fees = validateFeeSchedule(input);
      // The new channel is the merchant's default: a resolution kept for "the default" is then out of date.
      const created = await prisma.$transaction(async (tx) => {
        await lockMerchant(tx, principal.merchantId);
        await clearDefault(tx, principal);
        const channel = await tx.paymentChannel.create({
          data: {
            ...scope(principal),
            name,
            provider,
            configEncrypted,
            ...fees,
            isActive: true,
            isDefault: true,
            callbackToken: randomBytes(24).toString("base64url"),
          },
        });
        await credentialsSaved(tx, channel);
        return channel;
      }).finally(() => recent.clear());
      nudgeChecks();
      return created;
    },

    listChannels(principal: Principal, options: { activeOnly?: boolean | null } = {}): Promise<PaymentChannel[]> {
      return prisma.paymentChannel.findMany({
        where: { ...scope(principal), ...(options.activeOnly ? { isActive: true } : {}) },
        orderBy: { id: "asc" },
      });
    },

    getChannel,

    /** A channel by id, whoever's it is: for a payer's checkout, where the transaction named it (kept for a second, as above). */
    async findById(id: number): Promise<PaymentChannel | null> {
      const known = recent.get(`id:${id}`);
      if (known) return known;
      const [row] = await sql.query<ChannelRow>(`SELECT ${CHANNEL_COLUMNS} FROM payment_channels c WHERE c.id = $1`, [id]);
      return row ? recent.keep(channelFromRow(row)) : null;
    },

    /** The channel a provider callback path names (its hex-encoded token), or null. */
    async findByCallbackSegment(segment: string, provider?: string): Promise<PaymentChannel | null> {
      const token = decodeCallbackToken(segment);
      // Every provider callback starts here (an STK result on each payment): plain SQL, as the other hot paths.
      let channel = token ? recent.get(`token:${token}`) : null;
      if (token && !channel) {
        const [row] = await sql.query<ChannelRow>(`SELECT ${CHANNEL_COLUMNS} FROM payment_channels c WHERE c.callback_token = $1`, [token]);
        channel = row ? recent.keep(channelFromRow(row)) : null;
      }
      return channel && (provider === undefined || channel.provider === provider) ? channel : null;
    },

    /**
     * The URL a merchant pastes into the provider's dashboard so its webhooks reach this channel (Paystack
     * has one webhook URL per account and mode); null for providers configured otherwise.
     */
    providerWebhookUrl(channel: Pick<PaymentChannel, "provider" | "callbackToken">): string | null {
      return webhookUrl(channel);
    },

    /**
     * Renames, changes the fee schedule and/or replaces the credentials; the provider itself cannot change. A new
     * schedule applies to payments that complete from now on: those already made keep the fee written on them.
     */
    async updateChannel(principal: Principal, id: number, input: UpdateChannelInput): Promise<PaymentChannel> {
      const channel = await getChannel(principal, id);
      if (input.removeFeeCap && input.feeCap != null) throw new ValidationError("fee_cap", "cannot be set and removed at once");
      const data: Prisma.PaymentChannelUpdateInput = { ...validateFeeSchedule(input), ...(input.removeFeeCap ? { feeCap: null } : {}) };
      if (input.name != null) data.name = validateName(input.name);
      if (input.config != null) {
        data.configEncrypted = secrets.encryptJson(validateConfig(validateProvider(channel.provider), input.config));
      }
      const updated = await prisma.$transaction(async (tx) => {
        const row = await tx.paymentChannel.update({ where: { id: channel.id }, data });
        if (input.config != null) await credentialsSaved(tx, row);
        return row;
      });
      recent.clear();
      if (input.config != null) nudgeChecks();
      return updated;
    },

    async setDefaultChannel(principal: Principal, id: number): Promise<PaymentChannel> {
      return prisma.$transaction(async (tx) => {
        await lockMerchant(tx, principal.merchantId);
        const channel = await tx.paymentChannel.findFirst({ where: { id, ...scope(principal) } });
        if (!channel) throw new NotFoundError(`Payment channel ${id}`);
        if (!channel.isActive) throw new GatewayError("channel_inactive", `Payment channel ${id} is inactive`);
        await clearDefault(tx, principal);
        return tx.paymentChannel.update({ where: { id }, data: { isDefault: true } });
      }).finally(() => recent.clear());
    },

    /** Makes a deactivated channel usable again (it does not become the default: setDefaultChannel does that). */
    async activateChannel(principal: Principal, id: number): Promise<PaymentChannel> {
      const channel = await getChannel(principal, id);
      assertUsable(channel, "id");
      const updated = await prisma.paymentChannel.update({ where: { id: channel.id }, data: { isActive: true } });
      recent.clear();
      return updated;
    },

    /**
     * What a schedule takes of a payment of `amount` (minor units), by the same SQL function that fixes each payment's
     * fee when it completes (payment_fee()), so the dashboard's preview is what the payment will be charged.
     */
    async previewFee(schedule: FeeSchedule, amount: bigint | number): Promise<bigint> {
      const { feePercentBps = 0, feeFixed = 0n, feeCap = null } = validateFeeSchedule(schedule);
      const minor = typeof amount === "bigint" ? amount : Number.isSafeInteger(amount) ? BigInt(amount) : -1n;
      if (minor < 0n || minor > 10n ** 12n) throw new ValidationError("amount", "must be an integer from 0 to 10^12 (minor units)");
      const [row] = await sql.query<{ fee: string }>("SELECT payment_fee($1::bigint, $2::int, $3::bigint, $4::bigint)::text AS fee", [
        minor.toString(), feePercentBps, feeFixed.toString(), feeCap?.toString() ?? null,
      ]);
      return BigInt(row!.fee);
    },

    /** A deactivated channel cannot be the default; the merchant then has none until one is set. */
    async deactivateChannel(principal: Principal, id: number): Promise<PaymentChannel> {
      return prisma.$transaction(async (tx) => {
        await lockMerchant(tx, principal.merchantId);
        const channel = await tx.paymentChannel.findFirst({ where: { id, ...scope(principal) } });
        if (!channel) throw new NotFoundError(`Payment channel ${id}`);
        return tx.paymentChannel.update({ where: { id }, data: { isActive: false, isDefault: false } });
      }).finally(() => recent.clear());
    },

    isUsableChannel,

    /** Shows one of the caller's channels' credentials to its provider now, and keeps the verdict. */
    async checkCredentials(principal: Principal, id: number): Promise<ChannelCredentialCheck> {
      return checkCredentialsOf(await getChannel(principal, id));
    },

    /** The last verdict on each channel's credentials (absent: never checked since they were saved). */
    async credentialChecks(channelIds: number[]): Promise<Map<number, ChannelCredentialCheck>> {
      const rows = channelIds.length ? await prisma.channelCredentialCheck.findMany({ where: { channelId: { in: channelIds } } }) : [];
      return new Map(rows.map((row) => [row.channelId, row]));
    },

    /** The channel a payment should use: the one named, or else the merchant's active default. */
    async resolvePaymentChannel(principal: Principal, channelId?: number | null): Promise<PaymentChannel> {
      if (channelId != null) {
        const channel = await getChannel(principal, channelId);
        if (!channel.isActive) throw new GatewayError("channel_inactive", `Payment channel ${channelId} is inactive`);
        return assertUsable(channel, "payment_channel_id");
      }
      const fallback = await prisma.paymentChannel.findFirst({ where: { ...scope(principal), isDefault: true, isActive: true } });
      if (!fallback) throw new ValidationError("payment_channel_id", "is required: the merchant has no active default payment channel");
      return assertUsable(fallback, "payment_channel_id");
    },

    /**
     * resolvePaymentChannel and the merchant's default currency in one statement (initialize's hot path), kept for a
     * second (RecentChannels); a refusal (no such channel, an inactive one) is never kept.
     */
    resolvePaymentChannelAndCurrency(principal: Principal, channelId?: number | null): Promise<PaymentChannelResolution> {
      const { merchantId, mode } = principal;
      return recent.resolution(`${merchantId}:${mode}:${channelId ?? "default"}`, () => resolveUncached(merchantId, mode, channelId ?? null));
    },

    /** The decrypted credentials; only connectors should need them, and they must never be logged. */
    readChannelConfig<T = Record<string, unknown>>(channel: PaymentChannel): T {
      return secrets.decryptJson<T>(channel.configEncrypted);
    },
  };
}

export type ChannelService = ReturnType<typeof createChannelService>;
