import { describe, expect, it } from "vitest";
import { checkSecretsInLogs, registerSecret, watchOutput } from "./secrets-in-logs.ts";

describe("secrets in a gateway's output", () => {
  it("flags a whole key, a webhook secret and a registered password; not a key's prefix or the development banner", () => {
    const out = watchOutput("gateway");
    out.write('{"msg":"key sk_test_Ab12Cd34 revoked"}\n  Test API key (shown once, keep it): sk_test_abcdefghijklmnopqrstuvwxyz012345\n');
    out.write('  Dashboard: http://x/dashboard  e-mail demo@example.com  password (shown once) pw-banner-secret\n');
    expect(() => checkSecretsInLogs()).not.toThrow();

    out.write('{"msg":"presented sk_live_abcdefghijklmnopqrstuvwxyz012345"}\n');
    expect(() => checkSecretsInLogs()).toThrow(/sk_live_abcd/);
    out.write('{"secret":"whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}\n');
    expect(() => checkSecretsInLogs()).toThrow(/whsec_/);
    registerSecret("correct horse battery");
    out.write('{"body":{"password":"correct horse ');
    expect(() => checkSecretsInLogs()).not.toThrow(); // the line is not complete yet
    out.write('battery"}}');
    out.end();
    expect(() => checkSecretsInLogs()).toThrow(/correct horse/);
    expect(() => checkSecretsInLogs()).not.toThrow(); // reported once
  });
});
