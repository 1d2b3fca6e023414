import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { fingerprintKeyFrom, isStored, requestFingerprint } from "../../src/idempotency/hooks.ts";

describe("idempotency fingerprint", () => {
  it("ignores the order of object keys but not values, method or URL", () => {
    const key = fingerprintKeyFrom(Buffer.alloc(32, 7));
    const a = requestFingerprint(key, "POST", "/api/x", { b: 1, a: { d: [1, 2], c: "x" } });
    expect(requestFingerprint(key, "POST", "/api/x", { a: { c: "x", d: [1, 2] }, b: 1 })).toBe(a);
    expect(requestFingerprint(key, "POST", "/api/x", { a: { c: "x", d: [2, 1] }, b: 1 })).not.toBe(a);
    expect(requestFingerprint(key, "POST", "/api/y", { b: 1, a: { d: [1, 2], c: "x" } })).not.toBe(a);
    expect(a).toMatch(/^[0-9a-f]{64}$/);
  });

  it("is keyed: without the gateway's key, a body (a password in it) cannot be confirmed by hashing guesses", () => {
    const body = { email: "a@b.test", password: "correct horse battery" };
    const fingerprint = requestFingerprint(fingerprintKeyFrom(Buffer.alloc(32, 7)), "POST", "/graphql", body);
    expect(requestFingerprint(fingerprintKeyFrom(Buffer.alloc(32, 8)), "POST", "/graphql", body)).not.toBe(fingerprint);
    const plain = createHash("sha256").update(`POST\n/graphql\n${JSON.stringify({ email: body.email, password: body.password })}`).digest("hex");
    expect(fingerprint).not.toBe(plain);
  });
});

describe("which responses an Idempotency-Key records", () => {
  const envelope = (code: string) => JSON.stringify({ status: "error", message: "m", code });

  it("stores successes, business failures and server errors (as Stripe does)", () => {
    expect(isStored(201, '{"status":"success"}', false)).toBe(true);
    expect(isStored(409, envelope("conflict"), false)).toBe(true);
    expect(isStored(402, envelope("payment_declined"), false)).toBe(true);
    expect(isStored(500, envelope("internal_error"), false)).toBe(true);
    expect(isStored(502, envelope("provider_error"), false)).toBe(true);
  });

  it("does not store 429s, the database's 503s and requests refused before execution", () => {
    expect(isStored(429, envelope("rate_limited"), false)).toBe(false);
    expect(isStored(503, envelope("service_unavailable"), false)).toBe(false);
    // A provider's refusal is the payment's outcome, replayed like any other.
    expect(isStored(503, envelope("provider_unavailable"), false)).toBe(true);
    expect(isStored(200, '{"data":{"a":null},"errors":[{"message":"x","extensions":{"code":"service_unavailable"}}]}', true)).toBe(false);
    for (const code of ["validation_failed", "malformed_json", "unsupported_media_type", "payload_too_large", "route_not_found"]) {
      expect(isStored(400, envelope(code), false)).toBe(false);
    }
  });

  it("reads GraphQL results: no data means nothing executed; all-ValidationError roots are not stored", () => {
    expect(isStored(200, '{"errors":[{"message":"Syntax Error"}]}', true)).toBe(false);
    expect(isStored(400, '{"errors":[{"message":"Query depth limit"}]}', true)).toBe(false);
    expect(isStored(200, '{"data":{"a":{"code":"validation_failed","message":"x"}}}', true)).toBe(false);
    expect(isStored(200, '{"data":{"a":{"code":"validation_failed"},"b":{"id":1}}}', true)).toBe(true);
    expect(isStored(200, '{"data":{"a":{"code":"conflict","message":"x"}}}', true)).toBe(true);
    // A resolver failed after execution began: like a 500, stored.
    expect(isStored(200, '{"data":null,"errors":[{"message":"Unexpected error."}]}', true)).toBe(true);
  });
});
