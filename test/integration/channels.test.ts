import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { DeactivateChannel, SetDefaultChannel, validationError } from "../support/documents.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/** A channel as the list and createPaymentChannel answer it. */
graphql(`
  fragment ChannelFields on PaymentChannel {
    id
    databaseId
    name
    provider
    isActive
    isDefault
  }
`);

const ChannelsList = graphql(`
  query ChannelsList($activeOnly: Boolean) {
    paymentChannels(activeOnly: $activeOnly) { ...ChannelFields createdAt feePercentBps feeFixed feeCap }
  }
`);

const ChannelsCreate = graphql(`
  mutation ChannelsCreate($input: CreatePaymentChannelInput!) {
    createPaymentChannel(input: $input) { __typename ...ChannelFields ...FieldFailure }
  }
`);

const ChannelsUpdate = graphql(`
  mutation ChannelsUpdate($input: UpdatePaymentChannelInput!) {
    updatePaymentChannel(input: $input) { __typename ... on PaymentChannel { databaseId name provider } ...FieldFailure }
  }
`);

const ChannelsUpdateFees = graphql(`
  mutation ChannelsUpdateFees($input: UpdatePaymentChannelInput!) {
    updatePaymentChannel(input: $input) { ... on PaymentChannel { feePercentBps feeFixed } }
  }
`);

const ChannelsNode = graphql(`
  query ChannelsNode($id: ID!) {
    node(id: $id) { id ... on PaymentChannel { databaseId name } }
  }
`);

/** The object of a typed-error field (without __typename), or a failing assertion showing the error result. */
function success<T extends { __typename?: string }>(result: T | undefined): Omit<Exclude<T, { code: unknown }>, "__typename"> {
  if (!result || "code" in result) throw new Error(`expected a success result, got ${JSON.stringify(result)}`);
  const { __typename, ...object } = result as Exclude<T, { code: unknown }>;
  return object;
}

const isoMillis = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const paystackConfig = { public_key: "pk_test_0123456789abcdef", secret_key: "sk_test_TOPSECRET_9f8e7d6c5b4a" };
const mpesaConfig = {
  consumer_key: "ck_abc",
  consumer_secret: "cs_MPESA_SECRET_123",
  shortcode: "174379",
  passkey: "bfb279f9aa9bdbcf158e97dd71a467cd",
  environment: "sandbox",
  transaction_type: "paybill",
};

/** A one-field refusal: its message ("field: problem"), and the same in the errors list. */
const validationEnvelope = (message: string) => {
  const at = message.indexOf(": ");
  return { status: "error", message, code: "validation_failed", errors: [{ field: message.slice(0, at), message: message.slice(at + 2) }] };
};

describe("payment channels", () => {
  let gw: TestGateway;
  let acme: TestMerchant;
  // Every log line at trace level, unredacted: a secret must never reach a log call at all.
  const logLines: string[] = [];

  beforeAll(async () => {
    gw = await startTestGateway({ logger: pino({ level: "trace" }, { write: (line: string) => void logLines.push(line) }) });
    acme = await gw.createMerchant("Acme");
  });
  afterAll(() => gw?.close());

  const rest = (key: string) => apiClient(gw.url, key);
  const createChannel = (key: string, body: unknown) => rest(key).post("/api/payment-channels/create", body);

  describe("POST /api/payment-channels/create", () => {
    it("creates an active default channel and answers 201 with the documented body", async () => {
      const m = await gw.createMerchant();
      const res = await createChannel(m.testKey, { name: "  Sandbox  ", provider: "sandbox", config: {} });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        status: "success",
        message: "Payment channel created",
        channel: {
          id: expect.any(Number),
          name: "Sandbox",
          provider: "sandbox",
          is_active: true,
          is_default: true,
          created_at: expect.stringMatching(isoMillis),
          fee_percent_bps: 0,
          fee_fixed: 0,
          fee_cap: null,
        },
      });
    });

    it("keeps a fee schedule: given on create, returned with the channel, changed through GraphQL", async () => {
      const m = await gw.createMerchant();
      const res = await createChannel(m.testKey, { name: "Cards", provider: "sandbox", fee_percent_bps: 290, fee_fixed: 1_000 });
      expect(res.status, res.text).toBe(201);
      expect(res.body.channel).toMatchObject({ fee_percent_bps: 290, fee_fixed: 1_000 });
      const updated = await rest(m.testKey).graphql(ChannelsUpdateFees, { input: { id: res.body.channel.id, feePercentBps: 150 } });
      expect(updated.body.data?.updatePaymentChannel).toEqual({ feePercentBps: 150, feeFixed: 1_000 });
      const listed = (await rest(m.testKey).get("/api/payment-channels/list")).body.channels;
      expect(listed).toEqual([expect.objectContaining({ id: res.body.channel.id, fee_percent_bps: 150, fee_fixed: 1_000 })]);
    });

    it.each([
      [{ fee_percent_bps: 10_001 }, "fee_percent_bps: must be an integer from 0 to 10000 (basis points: 150 is 1.5%)"],
      [{ fee_percent_bps: -1 }, "fee_percent_bps: must be an integer from 0 to 10000 (basis points: 150 is 1.5%)"],
      [{ fee_percent_bps: 1.5 }, "fee_percent_bps: must be an integer"],
      [{ fee_fixed: -5 }, "fee_fixed: must be an integer from 0 to 10^12 (minor units)"],
      [{ fee_fixed: "100" }, "fee_fixed: must be an integer"],
    ])("refuses the fee schedule %j with a 400 naming the field, and creates nothing", async (fees, message) => {
      const m = await gw.createMerchant();
      const res = await createChannel(m.testKey, { name: "Bad fees", provider: "sandbox", ...fees });
      expect(res.status, res.text).toBe(400);
      expect(res.body).toEqual(validationEnvelope(message));
      expect((await rest(m.testKey).get("/api/payment-channels/list")).body.channels).toEqual([]);
    });

    it("accepts a sandbox channel without config and ignores unknown fields", async () => {
      const res = await createChannel(acme.testKey, { name: "Plain", provider: "sandbox", colour: "blue" });
      expect(res.status).toBe(201);
      expect(res.body.channel).not.toHaveProperty("colour");
    });

    it("never returns the config, and stores only ciphertext", async () => {
      const res = await createChannel(acme.testKey, { name: "Paystack", provider: "paystack", config: paystackConfig });
      expect(res.status).toBe(201);
      expect(res.text).not.toContain(paystackConfig.secret_key);
      expect(res.text).not.toContain("config");
      const listed = await rest(acme.testKey).get("/api/payment-channels/list");
      expect(listed.text).not.toContain(paystackConfig.secret_key);
      const viaGraphql = await rest(acme.testKey).graphql(ChannelsList);
      expect(viaGraphql.text).not.toContain(paystackConfig.secret_key);

      const row = await gw.gateway.db.prisma.paymentChannel.findUniqueOrThrow({ where: { id: res.body.channel.id } });
      expect(row.configEncrypted).toMatch(/^v1\./);
      expect(row.configEncrypted).not.toContain(paystackConfig.secret_key);
      expect(row.configEncrypted).not.toContain("secret_key");
      expect(gw.gateway.services.channels.readChannelConfig(row)).toEqual(paystackConfig);
    });

    it("creates an M-Pesa channel with a complete config", async () => {
      const res = await createChannel(acme.testKey, { name: "M-Pesa", provider: "mpesa", config: mpesaConfig });
      expect(res.status).toBe(201);
      expect(res.text).not.toContain(mpesaConfig.consumer_secret);
      const till = { ...mpesaConfig, transaction_type: "till", till_number: "123456" };
      expect((await createChannel(acme.testKey, { name: "Till", provider: "mpesa", config: till })).status).toBe(201);
    });

    const without = <T extends object>(config: T, key: keyof T) => Object.fromEntries(Object.entries(config).filter(([k]) => k !== key));

    const invalidBodies: [label: string, body: unknown, message: string][] = [
      ["a blank name", { name: "   ", provider: "sandbox" }, "name: is required"],
      ["a null name", { name: null, provider: "sandbox" }, "name: is required"],
      ["a name over 100 characters", { name: "x".repeat(101), provider: "sandbox" }, "name: must be at most 100 characters"],
      ["a numeric name", { name: 42, provider: "sandbox" }, "name: must be a string"],
      ["no provider", { name: "X" }, "provider: is required"],
      ["an empty provider", { name: "X", provider: "" }, "provider: must be one of sandbox, mpesa, paystack"],
      ["an unknown provider", { name: "X", provider: "stripe" }, "provider: must be one of sandbox, mpesa, paystack"],
      ["a provider of the wrong case", { name: "X", provider: "Paystack" }, "provider: must be one of sandbox, mpesa, paystack"],
      ["an object provider", { name: "X", provider: { name: "sandbox" } }, "provider: must be a string"],
      ["a string config", { name: "X", provider: "sandbox", config: "secret" }, "config: must be an object"],
      ["an array config", { name: "X", provider: "paystack", config: [] }, "config: must be an object"],
      ["paystack without config", { name: "X", provider: "paystack" }, "config.public_key: is required"],
      ["paystack without public_key", { name: "X", provider: "paystack", config: without(paystackConfig, "public_key") }, "config.public_key: is required"],
      ["paystack without secret_key", { name: "X", provider: "paystack", config: without(paystackConfig, "secret_key") }, "config.secret_key: is required"],
      [
        "paystack with a malformed secret_key",
        { name: "X", provider: "paystack", config: { ...paystackConfig, secret_key: "hunter2" } },
        "config.secret_key: must start with sk_test_ or sk_live_",
      ],
      ["paystack with a numeric public_key", { name: "X", provider: "paystack", config: { ...paystackConfig, public_key: 1 } }, "config.public_key: must be a string"],
      ...(["consumer_key", "consumer_secret", "shortcode", "passkey", "environment", "transaction_type"] as const).map(
        (key): [string, unknown, string] => [`mpesa without ${key}`, { name: "X", provider: "mpesa", config: without(mpesaConfig, key) }, `config.${key}: is required`],
      ),
      ["mpesa with a numeric shortcode", { name: "X", provider: "mpesa", config: { ...mpesaConfig, shortcode: 174379 } }, "config.shortcode: must be a string"],
      [
        "mpesa with an unknown environment",
        { name: "X", provider: "mpesa", config: { ...mpesaConfig, environment: "prod" } },
        "config.environment: must be sandbox or production",
      ],
      [
        "an mpesa till without till_number",
        { name: "X", provider: "mpesa", config: { ...mpesaConfig, transaction_type: "till" } },
        "config.till_number: is required when transaction_type is till",
      ],
    ];

    it.each(invalidBodies)("rejects %s with a 400 naming the field", async (_label, body, message) => {
      const res = await createChannel(acme.testKey, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(validationEnvelope(message));
      expect(res.text).not.toContain("TOPSECRET");
    });

    it("rejects no body fields with a 400 naming each required one", async () => {
      const res = await createChannel(acme.testKey, {});
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        ...validationEnvelope("name: is required"),
        errors: [
          { field: "name", message: "is required" },
          { field: "provider", message: "is required" },
        ],
      });
    });

    it("lists every field whose type is wrong, not only the first", async () => {
      const res = await createChannel(acme.testKey, { name: 42, provider: { name: "sandbox" } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({
        status: "error",
        code: "validation_failed",
        message: "name: must be a string",
        errors: [
          { field: "name", message: "must be a string" },
          { field: "provider", message: "must be a string" },
        ],
      });
    });

    it("creates nothing when validation fails", async () => {
      const m = await gw.createMerchant();
      await createChannel(m.testKey, { name: "Bad", provider: "paystack", config: {} });
      expect((await rest(m.testKey).get("/api/payment-channels/list")).body.channels).toEqual([]);
    });
  });

  describe("GET /api/payment-channels/list", () => {
    let merchant: TestMerchant;
    let first: number;
    let second: number;

    beforeAll(async () => {
      merchant = await gw.createMerchant();
      first = (await createChannel(merchant.testKey, { name: "First", provider: "sandbox" })).body.channel.id;
      second = (await createChannel(merchant.testKey, { name: "Second", provider: "sandbox" })).body.channel.id;
      await rest(merchant.testKey).graphql(DeactivateChannel, { id: first });
    });

    it("lists every channel by default, oldest first, with the documented fields", async () => {
      const res = await rest(merchant.testKey).get("/api/payment-channels/list");
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        status: "success",
        channels: [
          { id: first, name: "First", provider: "sandbox", is_active: false, is_default: false, created_at: expect.stringMatching(isoMillis), fee_percent_bps: 0, fee_fixed: 0, fee_cap: null },
          { id: second, name: "Second", provider: "sandbox", is_active: true, is_default: true, created_at: expect.stringMatching(isoMillis), fee_percent_bps: 0, fee_fixed: 0, fee_cap: null },
        ],
      });
      expect((await rest(merchant.testKey).get("/api/payment-channels/list?active_only=false")).body).toEqual(res.body);
    });

    it("active_only=true lists only active channels", async () => {
      const res = await rest(merchant.testKey).get("/api/payment-channels/list?active_only=true");
      expect(res.status).toBe(200);
      expect(res.body.channels.map((c: { id: number }) => c.id)).toEqual([second]);
    });

    it.each(["yes", "1", "TRUE"])("active_only=%s is a 400 naming active_only", async (value) => {
      const res = await rest(merchant.testKey).get(`/api/payment-channels/list?active_only=${value}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(validationEnvelope("active_only: must be true or false"));
    });

    it("returns the same records as GraphQL paymentChannels", async () => {
      for (const activeOnly of [false, true]) {
        const viaRest = (await rest(merchant.testKey).get(`/api/payment-channels/list?active_only=${activeOnly}`)).body.channels;
        const viaGraphql = (await rest(merchant.testKey).graphql(ChannelsList, { activeOnly })).body.data!.paymentChannels;
        expect(
          viaGraphql.map((c) => ({
            id: c.databaseId, name: c.name, provider: c.provider, is_active: c.isActive, is_default: c.isDefault, created_at: c.createdAt,
            fee_percent_bps: c.feePercentBps, fee_fixed: c.feeFixed, fee_cap: c.feeCap,
          })),
        ).toEqual(viaRest);
      }
    });

    it("is an empty list for a merchant without channels", async () => {
      const m = await gw.createMerchant();
      const res = await rest(m.testKey).get("/api/payment-channels/list?active_only=true");
      expect(res.body).toEqual({ status: "success", channels: [] });
    });
  });

  describe("the default channel", () => {
    const defaults = async (key: string) =>
      (await rest(key).get("/api/payment-channels/list")).body.channels.filter((c: { is_default: boolean }) => c.is_default);

    it("moves to each newly created channel", async () => {
      const m = await gw.createMerchant();
      const a = (await createChannel(m.testKey, { name: "A", provider: "sandbox" })).body.channel;
      const b = (await createChannel(m.testKey, { name: "B", provider: "sandbox" })).body.channel;
      expect(a.is_default).toBe(true);
      expect(b.is_default).toBe(true);
      expect((await defaults(m.testKey)).map((c: { id: number }) => c.id)).toEqual([b.id]);
    });

    it("stays unique under concurrent creates", async () => {
      const m = await gw.createMerchant();
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => createChannel(m.testKey, { name: `C${i}`, provider: "sandbox" })));
      expect(results.map((r) => r.status)).toEqual(Array(8).fill(201));
      expect(await defaults(m.testKey)).toHaveLength(1);
    });

    it("is kept separately per mode", async () => {
      const m = await gw.createMerchant();
      await createChannel(m.testKey, { name: "Test", provider: "sandbox" });
      // Sandbox channels are test-mode only (hardening issue item 9): live mode gets a real provider's.
      // Live channels are a signed-in live owner's to create (issue 35).
      await gw.createLiveChannel(m, { name: "Live", provider: "paystack", config: { public_key: "pk_live_x", secret_key: "sk_live_x" } });
      expect((await defaults(m.testKey)).map((c: { name: string }) => c.name)).toEqual(["Test"]);
      expect((await defaults(m.liveKey)).map((c: { name: string }) => c.name)).toEqual(["Live"]);
    });

    it("can be set and cleared through GraphQL", async () => {
      const m = await gw.createMerchant();
      const client = rest(m.testKey);
      const a = (await createChannel(m.testKey, { name: "A", provider: "sandbox" })).body.channel.id as number;
      const b = (await createChannel(m.testKey, { name: "B", provider: "sandbox" })).body.channel.id as number;

      const setA = await client.graphql(SetDefaultChannel, { id: a });
      expect(success(setA.body.data?.setDefaultPaymentChannel)).toEqual({ databaseId: a, isActive: true, isDefault: true });
      expect((await defaults(m.testKey)).map((c: { id: number }) => c.id)).toEqual([a]);

      const deactivated = await client.graphql(DeactivateChannel, { id: a });
      expect(success(deactivated.body.data?.deactivatePaymentChannel)).toEqual({ databaseId: a, isActive: false, isDefault: false });
      expect(await defaults(m.testKey)).toEqual([]);

      const inactive = await client.graphql(SetDefaultChannel, { id: a });
      expect(inactive.body.data?.setDefaultPaymentChannel).toEqual({
        __typename: "GatewayError",
        code: "channel_inactive",
        message: `Payment channel ${a} is inactive`,
      });
      expect(await defaults(m.testKey)).toEqual([]);

      expect(success((await client.graphql(SetDefaultChannel, { id: b })).body.data?.setDefaultPaymentChannel).isDefault).toBe(true);
      const missing = await client.graphql(SetDefaultChannel, { id: 999_999 });
      expect(missing.body.data?.setDefaultPaymentChannel).toEqual({
        __typename: "NotFoundError",
        code: "not_found",
        message: "Payment channel 999999 not found",
      });
      const missingDeactivate = await client.graphql(DeactivateChannel, { id: 999_999 });
      expect(missingDeactivate.body.data?.deactivatePaymentChannel).toMatchObject({ __typename: "NotFoundError", code: "not_found" });
    });
  });

  describe("GraphQL mutations", () => {
    it("createPaymentChannel returns the channel, or a typed validation error naming the field", async () => {
      const client = rest(acme.testKey);
      const created = await client.graphql(ChannelsCreate, { input: { name: "GQL", provider: "paystack", config: paystackConfig } });
      expect(success(created.body.data?.createPaymentChannel)).toMatchObject({ name: "GQL", provider: "paystack", isActive: true, isDefault: true });
      expect(created.text).not.toContain(paystackConfig.secret_key);

      const invalid = await client.graphql(ChannelsCreate, { input: { name: "GQL", provider: "paypal" } });
      expect(invalid.body.errors).toBeUndefined();
      expect(invalid.body.data?.createPaymentChannel).toEqual(validationError("provider", "must be one of sandbox, mpesa, paystack"));
    });

    it("updatePaymentChannel renames and re-validates and re-encrypts the config", async () => {
      const client = rest(acme.testKey);
      const id = (await createChannel(acme.testKey, { name: "Old", provider: "paystack", config: paystackConfig })).body.channel.id as number;
      const newConfig = { public_key: "pk_live_newpublic", secret_key: "sk_live_ROTATED_SECRET" };

      const updated = await client.graphql(ChannelsUpdate, { input: { id, name: "New", config: newConfig } });
      expect(success(updated.body.data?.updatePaymentChannel)).toEqual({ databaseId: id, name: "New", provider: "paystack" });
      expect(updated.text).not.toContain(newConfig.secret_key);
      const row = await gw.gateway.db.prisma.paymentChannel.findUniqueOrThrow({ where: { id } });
      expect(row.configEncrypted).not.toContain(newConfig.secret_key);
      expect(gw.gateway.services.channels.readChannelConfig(row)).toEqual(newConfig);

      const bad = await client.graphql(ChannelsUpdate, { input: { id, config: { public_key: "pk_test_x" } } });
      expect(bad.body.data?.updatePaymentChannel).toMatchObject({ __typename: "ValidationError", field: "config.secret_key", message: "config.secret_key: is required" });
      const blank = await client.graphql(ChannelsUpdate, { input: { id, name: " " } });
      expect(blank.body.data?.updatePaymentChannel).toMatchObject({ __typename: "ValidationError", field: "name" });
      const renamedOnly = await client.graphql(ChannelsUpdate, { input: { id, name: "Newer" } });
      expect(success(renamedOnly.body.data?.updatePaymentChannel).name).toBe("Newer");
      const after = await gw.gateway.db.prisma.paymentChannel.findUniqueOrThrow({ where: { id } });
      expect(gw.gateway.services.channels.readChannelConfig(after)).toEqual(newConfig);
    });

    it("node(id) finds a channel only for its own merchant and mode", async () => {
      const other = await gw.createMerchant();
      const created = await rest(acme.testKey).graphql(ChannelsCreate, { input: { name: "Node", provider: "sandbox" } });
      const { id, databaseId } = success(created.body.data?.createPaymentChannel);
      expect((await rest(acme.testKey).graphql(ChannelsNode, { id })).body.data?.node).toEqual({ id, databaseId, name: "Node" });
      expect((await rest(acme.liveKey).graphql(ChannelsNode, { id })).body.data?.node).toBeNull();
      expect((await rest(other.testKey).graphql(ChannelsNode, { id })).body.data?.node).toBeNull();
    });
  });

  describe("resolvePaymentChannel (for the transactions module)", () => {
    const principal = (m: TestMerchant, mode: "test" | "live" = "test") => ({ merchantId: m.id, mode, role: "owner" as const, userId: null, keyId: null, keyPrefix: null });

    it("returns the named channel, or the active default when none is named", async () => {
      const m = await gw.createMerchant();
      const a = (await createChannel(m.testKey, { name: "A", provider: "sandbox" })).body.channel.id as number;
      const b = (await createChannel(m.testKey, { name: "B", provider: "sandbox" })).body.channel.id as number;
      const channels = gw.gateway.services.channels;
      expect((await channels.resolvePaymentChannel(principal(m), a)).id).toBe(a);
      expect((await channels.resolvePaymentChannel(principal(m))).id).toBe(b);
      expect((await channels.resolvePaymentChannel(principal(m), null)).id).toBe(b);
    });

    it("rejects another merchant's or mode's channel as not found, and an inactive one as channel_inactive", async () => {
      const m = await gw.createMerchant();
      const other = await gw.createMerchant();
      const id = (await createChannel(m.testKey, { name: "A", provider: "sandbox" })).body.channel.id as number;
      const channels = gw.gateway.services.channels;
      await expect(channels.resolvePaymentChannel(principal(other), id)).rejects.toMatchObject({
        code: "not_found",
        status: 404,
        message: `Payment channel ${id} not found`,
      });
      await expect(channels.resolvePaymentChannel(principal(m, "live"), id)).rejects.toMatchObject({ code: "not_found" });
      await channels.deactivateChannel(principal(m), id);
      await expect(channels.resolvePaymentChannel(principal(m), id)).rejects.toMatchObject({
        code: "channel_inactive",
        status: 400,
        message: `Payment channel ${id} is inactive`,
      });
    });

    it("asks for payment_channel_id when there is no active default", async () => {
      const m = await gw.createMerchant();
      await expect(gw.gateway.services.channels.resolvePaymentChannel(principal(m))).rejects.toMatchObject({
        code: "validation_failed",
        field: "payment_channel_id",
        message: "payment_channel_id: is required: the merchant has no active default payment channel",
      });
    });
  });

  // Last, so it sees the log lines of every test above.
  it("never writes a credential to the log", () => {
    expect(logLines.length).toBeGreaterThan(0);
    const log = logLines.join("\n");
    for (const secret of [paystackConfig.secret_key, mpesaConfig.consumer_secret, "sk_live_ROTATED_SECRET", "TOPSECRET"]) {
      expect(log).not.toContain(secret);
    }
  });
});
