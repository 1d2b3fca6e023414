import { describe, expect, it } from "vitest";
import { darajaScrubber } from "../../src/providers/mpesa/client.ts";
import { paystackScrubber } from "../../src/providers/paystack/client.ts";

/** Each connector's scrubber: what a provider call record may never keep (secrets, PINs, card numbers past the last 4, CVVs). */
const mpesaConfig = {
  consumer_key: "ck_visible",
  consumer_secret: "cs_SECRET_consumer_1",
  passkey: "bfb279f9aa9bdbcf158e97dd71a467cd2e0c893059b10f78e6b72ada1ed2c919",
  initiator_password: "Init#Pass-2026",
  security_credential: "Q2VydGlmaWNhdGUtZW5jcnlwdGVkLWNyZWRlbnRpYWw=",
};

describe("the Daraja scrubber", () => {
  const scrub = darajaScrubber(mpesaConfig, "TOKEN-abc123xyz");

  it("removes the STK Password, the SecurityCredential and the token, keeping what support reads", () => {
    const body = { BusinessShortCode: "174379", Password: "MTc0Mzc5YmZiMjc5", Timestamp: "20261126120000", Amount: 10, PhoneNumber: "254708374149", SecurityCredential: "abc==", access_token: "TOKEN-abc123xyz", expires_in: "3599" };
    expect(JSON.parse(scrub(JSON.stringify(body)))).toEqual({ ...body, Password: "[redacted]", SecurityCredential: "[redacted]", access_token: "[redacted]" });
  });

  it("removes the channel's credentials wherever they appear, also in free text", () => {
    const text = scrub(JSON.stringify({ errorMessage: `Bad credentials cs_SECRET_consumer_1 / Init#Pass-2026 / ${mpesaConfig.passkey} / Bearer TOKEN-abc123xyz` }));
    for (const secret of [mpesaConfig.consumer_secret, mpesaConfig.initiator_password, mpesaConfig.passkey, "TOKEN-abc123xyz"]) expect(text).not.toContain(secret);
    expect(text).toContain("Bad credentials");
    expect(scrub(`plain text ${mpesaConfig.security_credential}`)).toBe("plain text [redacted]");
  });

  it("removes secret fields at any depth and in any case, and Authorization", () => {
    const body = { Outer: { initiator_password: "x1", Consumer_Secret: "x2", list: [{ PIN: "0000", authorization: "Basic Y2s6Y3M=" }] } };
    expect(JSON.parse(scrub(JSON.stringify(body)))).toEqual({ Outer: { initiator_password: "[redacted]", Consumer_Secret: "[redacted]", list: [{ PIN: "[redacted]", authorization: "[redacted]" }] } });
  });
});

describe("the Paystack scrubber", () => {
  const secretKey = "sk_test_0123456789abcdef0123456789abcdef";
  const scrub = paystackScrubber(secretKey);

  it("removes authorization codes, keeps the card's last 4, bin and brand", () => {
    const data = { status: true, data: { reference: "ref_1", amount: 250000, authorization: { authorization_code: "AUTH_8dfhjjdt", bin: "408408", last4: "4081", brand: "visa", reusable: true } } };
    expect(JSON.parse(scrub(JSON.stringify(data))).data.authorization).toEqual({ authorization_code: "[redacted]", bin: "408408", last4: "4081", brand: "visa", reusable: true });
  });

  it("keeps a card number to its last 4, removes CVV, PIN and OTP", () => {
    const charge = { card: { number: "4084 0840 8408 4081", cvv: "408", expiry_month: "12" }, pin: "1234", otp: "123456", email: "payer@example.com" };
    expect(JSON.parse(scrub(JSON.stringify(charge)))).toEqual({ card: { number: "************4081", cvv: "[redacted]", expiry_month: "12" }, pin: "[redacted]", otp: "[redacted]", email: "payer@example.com" });
  });

  it("masks a card number in free text (Luhn-valid runs only: phone numbers and amounts stay)", () => {
    expect(scrub("declined card 5060666666666666666 for 254708374149, amount 250000")).toBe("declined card ***************6666 for 254708374149, amount 250000");
    expect(scrub('{"gateway_response":"card 4084-0840-8408-4081 declined"}')).toBe('{"gateway_response":"card ************4081 declined"}');
    expect(scrub("order 1234567890123")).toBe("order 1234567890123");
  });

  it("removes the channel's secret key, and any Paystack secret key, wherever it appears", () => {
    expect(scrub(`{"message":"Invalid key ${secretKey}"}`)).toBe('{"message":"Invalid key [redacted]"}');
    expect(scrub("proxy echoed Authorization: Bearer sk_live_ZZZ999aaa")).toBe("proxy echoed Authorization: Bearer [redacted]");
    expect(scrub(JSON.stringify({ secret_key: "anything", public_key: "pk_test_1" }))).toBe('{"secret_key":"[redacted]","public_key":"pk_test_1"}');
  });

  it("leaves a body with nothing secret as it was", () => {
    const body = JSON.stringify({ status: true, message: "Verification successful", data: { id: 4099260516, status: "success", currency: "NGN" } });
    expect(scrub(body)).toBe(body);
  });
});
