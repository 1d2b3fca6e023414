import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";

/**
 * Password hashing with scrypt from node:crypto (memory-hard; no native addon to build, unlike argon2).
 * N = 2^15, r = 8, p = 1 uses 32 MiB and about 50-100 ms per hash: OWASP's minimum for scrypt. The
 * parameters are stored with each hash ("scrypt$N$r$p$salt$hash"), so they can be raised later
 * without invalidating existing passwords.
 */
const PARAMS = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 200;

function derive(password: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: 256 * params.N * params.r };
  return new Promise((resolve, reject) => scrypt(password.normalize("NFKC"), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key))));
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return ["scrypt", PARAMS.N, PARAMS.r, PARAMS.p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64url");
  const actual = await derive(password, Buffer.from(salt, "base64url"), { N: Number(n), r: Number(r), p: Number(p) });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

let unknownUserHash_: Promise<string> | undefined;

/** Checked against when the e-mail is unknown, so a wrong e-mail costs the same time as a wrong password. */
export function unknownUserHash(): Promise<string> {
  unknownUserHash_ ??= hashPassword(randomBytes(16).toString("hex"));
  return unknownUserHash_;
}
