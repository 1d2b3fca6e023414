import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** AES-256-GCM for provider credentials at rest. Format: v1.<iv>.<tag>.<ciphertext>, base64url parts. */
export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error("Encryption key must be 32 bytes");
    this.#key = key;
  }

  encrypt(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return ["v1", iv, cipher.getAuthTag(), ciphertext].map((p) => (typeof p === "string" ? p : p.toString("base64url"))).join(".");
  }

  decrypt(sealed: string): string {
    const [version, iv, tag, ciphertext] = sealed.split(".");
    if (version !== "v1" || iv === undefined || tag === undefined || ciphertext === undefined) {
      throw new Error("Unrecognised encrypted value");
    }
    const decipher = createDecipheriv("aes-256-gcm", this.#key, Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64url")), decipher.final()]).toString("utf8");
  }

  encryptJson(value: unknown): string {
    return this.encrypt(JSON.stringify(value));
  }

  decryptJson<T = unknown>(sealed: string): T {
    return JSON.parse(this.decrypt(sealed)) as T;
  }
}

const KEY_FILE = "encryption.key";

/**
 * The embedded default keeps a generated key in DATA_DIR (mode 0600) so `npm start` needs no setup.
 * Deployments on PostgreSQL pass ENCRYPTION_KEY instead (config enforces it).
 */
export function loadOrCreateKeyFile(dataDir: string): Buffer {
  const path = join(dataDir, KEY_FILE);
  if (existsSync(path)) {
    const hex = readFileSync(path, "utf8").trim();
    if (!/^[0-9a-f]{64}$/i.test(hex)) throw new Error(`${path} does not hold a 64-character hex key`);
    return Buffer.from(hex, "hex");
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  writeFileSync(path, `${key.toString("hex")}\n`, { mode: 0o600, flag: "wx" });
  chmodSync(path, 0o600);
  return key;
}
