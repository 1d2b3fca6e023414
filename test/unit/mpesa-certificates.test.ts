import { constants, createPublicKey, publicEncrypt, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

/** The Safaricom certificates shipped for B2C SecurityCredential encryption load and encrypt as Daraja expects. */
describe("Safaricom certificates", () => {
  it.each(["sandbox", "production"])("%s: an RSA-2048 Safaricom certificate that encrypts with PKCS#1 v1.5", (environment) => {
    const pem = readFileSync(new URL(`../../src/providers/mpesa/certs/${environment}.cer`, import.meta.url), "utf8");
    const certificate = new X509Certificate(pem);
    expect(certificate.subject).toMatch(/safaricom\.co\.ke/);
    const key = createPublicKey(pem);
    expect(key.asymmetricKeyDetails?.modulusLength).toBe(2048);
    const credential = publicEncrypt({ key, padding: constants.RSA_PKCS1_PADDING }, Buffer.from("Safaricom999!*!")).toString("base64");
    expect(Buffer.from(credential, "base64")).toHaveLength(256);
  });
});
