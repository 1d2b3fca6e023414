import { describe, expect, it } from "vitest";
import { assertNoSecrets, cardNumbersIn, secretsIn } from "../support/provider-call-secrets.ts";

/** The secret scan run over provider_calls after every connector's contract suite: it must catch each kind, and pass what is clean. */
describe("assertNoSecrets", () => {
  it("finds every kind of secret the brief names", () => {
    expect(secretsIn('{"key":"sk_live_abc123"}')).toHaveLength(1);
    expect(secretsIn("Authorization failed for sk_test_0123456789")).toHaveLength(1);
    expect(secretsIn('{"BusinessShortCode":"174379","Password":"MTc0Mzc5YmZi","Timestamp":"20261128195700"}')).toEqual(["a secret field with a value ($.Password)"]);
    expect(secretsIn('{"Initiator":"testapi","SecurityCredential":"kL9x/abc=="}')).toEqual(["a secret field with a value ($.SecurityCredential)"]);
    expect(secretsIn('{"consumer_secret":"s3cr3t"}')).toHaveLength(1);
    expect(secretsIn('{"pin":"1234","reference":"r"}')).toEqual(["a secret field with a value ($.pin)"]);
    expect(secretsIn('{"data":{"pin":1234}}')).toEqual(["a secret field with a value ($.data.pin)"]);
    expect(secretsIn('{"user":{"password":"hunter22"}}')).toHaveLength(1);
    expect(secretsIn('{"card":{"number":"4084084084084081","cvv":"408"}}')).toHaveLength(2);
    expect(secretsIn('{"access_token":"c9SQxWWhmdVRlyh0zh8gZDTkubVF","expires_in":"3599"}')).toHaveLength(1);
    // Not JSON (a form body, a truncated one): key=value pairs are read too.
    expect(secretsIn("password=hunter22&email=a@b.c")).toHaveLength(1);
    expect(secretsIn('{"Password":"MTc0Mzc5YmZi","Amount":1…[truncated]')).toHaveLength(1);
    // A credential of the test's own, wherever it is.
    expect(secretsIn("upstream said: bad credentials yT7Qn2", ["yT7Qn2"])).toHaveLength(1);
  });

  it("reads card numbers written with spaces or dashes, and only those passing Luhn with a network's prefix", () => {
    expect(cardNumbersIn("card 4084 0840 8408 4081 used")).toEqual(["4084084084084081"]);
    expect(cardNumbersIn("4084-0840-8408-4081 12")).toEqual(["4084084084084081"]);
    expect(cardNumbersIn("3782 822463 10005")).toEqual(["378282246310005"]);
    expect(cardNumbersIn("4084084084084082")).toEqual([]); // fails Luhn
    // Digits inside a word are not a card: a hex-encoded callback token is mostly digits (0x30-0x79 are digit pairs).
    expect(cardNumbersIn("https://pay.test/callbacks/daraja/6a4084084084084081f0/stk")).toEqual([]);
    expect(cardNumbersIn('{"number":"4084084084084081","url":"/x/4084084084084081/y"}')).toEqual(["4084084084084081"]);
    // Digits joined by dashes otherwise (Daraja's MerchantRequestID) are not read as one number.
    expect(cardNumbersIn("4-0840840-84084081")).toEqual([]);
    // Daraja's timestamps, receipts' ids and phone numbers are not cards.
    expect(cardNumbersIn('{"Timestamp":"20261128195700","PhoneNumber":254708374149,"CheckoutRequestID":"ws_CO_28112026195700123456"}')).toEqual([]);
  });

  it("passes what a scrubber left: placeholders, masked cards, last four digits, ordinary Daraja and Paystack bodies", () => {
    const rows = [
      { operation: "stk_push", requestBody: '{"BusinessShortCode":"174379","Password":"[redacted]","Timestamp":"20261128195700","Amount":1500,"PartyA":"254708374149"}', responseBody: '{"ResponseCode":"0","CheckoutRequestID":"ws_CO_28112026195700123456"}', error: null },
      { operation: "b2c", requestBody: '{"SecurityCredential":"***","InitiatorName":"testapi"}', responseBody: null, error: "timeout" },
      { operation: "charge", requestBody: '{"card":{"number":"408408******4081","cvv":""}}', responseBody: '{"data":{"authorization":{"last4":"4081","bin":"408408"}}}', error: null },
      { operation: "oauth", requestBody: null, responseBody: '{"access_token":"[redacted]","expires_in":"3599"}', error: null },
    ];
    expect(() => assertNoSecrets(rows, { known: ["bfb279f9aa9bdbcf"] })).not.toThrow();
    expect(() => assertNoSecrets([{ operation: "stk_push", requestBody: '{"Password":"MTc0"}' }])).toThrow(/stk_push\) requestBody: a secret field with a value \(\$\.Password\)/);
  });
});
