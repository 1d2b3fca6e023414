import { randomUUID } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { generateWebhookSecret, signWebhook, webhookHeaders } from "../../src/modules/webhooks/signing.ts";

/** Our signatures are checked with the reference Standard Webhooks library, exactly as a merchant would. */
const now = () => Math.floor(Date.now() / 1000);
const body = JSON.stringify({ type: "transaction.succeeded", data: { reference: "ref_123", amount: 1000, currency: "KES" } });

describe("webhook signing (Standard Webhooks)", () => {
  it("generates whsec_ secrets of at least 24 random bytes", () => {
    const secret = generateWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    expect(Buffer.from(secret.slice("whsec_".length), "base64").length).toBeGreaterThanOrEqual(24);
    expect(generateWebhookSecret()).not.toBe(secret);
  });

  it("produces the signature the reference library computes", () => {
    const secret = generateWebhookSecret();
    const id = `msg_${randomUUID()}`;
    const timestamp = now();
    expect(signWebhook({ id, timestamp, body, secrets: [secret] })).toBe(
      new Webhook(secret).sign(id, new Date(timestamp * 1000), body),
    );
  });

  it("is verified by a receiver using the reference library", () => {
    const secret = generateWebhookSecret();
    const headers = webhookHeaders({ id: `msg_${randomUUID()}`, timestamp: now(), body, secrets: [secret] });
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(headers["content-type"]).toBe("application/json");
    expect(headers["user-agent"]).toBe("payment-gateway-webhooks/1");
    expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+={0,2}$/);
  });

  it("is rejected for a tampered body, a wrong secret or a stale timestamp", () => {
    const secret = generateWebhookSecret();
    const id = `msg_${randomUUID()}`;
    const headers = webhookHeaders({ id, timestamp: now(), body, secrets: [secret] });
    expect(() => new Webhook(secret).verify(body.replace("1000", "100000"), headers)).toThrow(/signature/i);
    expect(() => new Webhook(generateWebhookSecret()).verify(body, headers)).toThrow(/signature/i);
    const stale = webhookHeaders({ id, timestamp: now() - 6 * 60, body, secrets: [secret] });
    expect(() => new Webhook(secret).verify(body, stale)).toThrow(/too old/i);
  });

  it("signs with every secret during a rotation, so either one verifies", () => {
    const [oldSecret, newSecret] = [generateWebhookSecret(), generateWebhookSecret()];
    const headers = webhookHeaders({ id: `msg_${randomUUID()}`, timestamp: now(), body, secrets: [oldSecret, newSecret] });
    expect(headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(new Webhook(oldSecret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(newSecret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it("refuses malformed secrets instead of signing with a garbled key", () => {
    const input = { id: "msg_1", timestamp: now(), body };
    expect(() => signWebhook({ ...input, secrets: ["not-a-secret"] })).toThrow(/whsec_/);
    expect(() => signWebhook({ ...input, secrets: ["whsec_"] })).toThrow(/whsec_/);
    expect(() => signWebhook({ ...input, secrets: [] })).toThrow(/at least one secret/);
  });
});
