import { mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { generateApiKey, hashApiKey, looksLikeApiKey } from "../../src/security/api-keys.ts";
import { loadOrCreateKeyFile, SecretBox } from "../../src/security/encryption.ts";

describe("API keys", () => {
  it("carry their mode in a visible prefix and are stored only as a hash", () => {
    const key = generateApiKey("test");
    expect(key.plaintext).toMatch(/^sk_test_[A-Za-z0-9_-]{32}$/);
    expect(key.plaintext.startsWith(key.prefix)).toBe(true);
    expect(key.prefix).toMatch(/^sk_test_.{8}$/);
    expect(key.hash).toBe(hashApiKey(key.plaintext));
    expect(key.hash).not.toContain(key.plaintext.slice(8));
    expect(generateApiKey("live").plaintext).toMatch(/^sk_live_/);
  });

  it("are unique", () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateApiKey("test").plaintext));
    expect(keys.size).toBe(200);
  });

  it("recognises only well-formed keys", () => {
    expect(looksLikeApiKey(generateApiKey("live").plaintext)).toBe(true);
    expect(looksLikeApiKey("sk_prod_abcdefabcdefabcdef")).toBe(false);
    expect(looksLikeApiKey("sk_test_short")).toBe(false);
    expect(looksLikeApiKey("' OR 1=1 --")).toBe(false);
  });
});

describe("SecretBox (AES-256-GCM)", () => {
  const box = new SecretBox(Buffer.alloc(32, 7));

  it("round-trips JSON and never contains the plaintext", () => {
    const sealed = box.encryptJson({ secret_key: "sk_test_supersecret" });
    expect(sealed).not.toContain("supersecret");
    expect(box.decryptJson(sealed)).toEqual({ secret_key: "sk_test_supersecret" });
    expect(box.encryptJson({ a: 1 })).not.toBe(box.encryptJson({ a: 1 })); // fresh IV each time
  });

  it("rejects a tampered ciphertext or the wrong key", () => {
    const sealed = box.encrypt("hello");
    const parts = sealed.split(".");
    const ciphertext = Buffer.from(parts[3]!, "base64url");
    ciphertext[0] = ciphertext[0]! ^ 1;
    parts[3] = ciphertext.toString("base64url");
    expect(() => box.decrypt(parts.join("."))).toThrow();
    expect(() => new SecretBox(Buffer.alloc(32, 8)).decrypt(sealed)).toThrow();
  });

  it("keeps the embedded key file in DATA_DIR with mode 0600 and reuses it", () => {
    const dir = mkdtempSync(join(tmpdir(), "keyfile-"));
    const key = loadOrCreateKeyFile(dir);
    expect(key).toHaveLength(32);
    expect(statSync(join(dir, "encryption.key")).mode & 0o777).toBe(0o600);
    expect(loadOrCreateKeyFile(dir).equals(key)).toBe(true);
    writeFileSync(join(dir, "encryption.key"), "not hex");
    expect(() => loadOrCreateKeyFile(dir)).toThrow(/64-character hex key/);
  });
});
