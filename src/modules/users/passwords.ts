import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";

/**
 * Password hashing with scrypt from node:crypto (memory-hard; no native addon to build, unlike argon2).
 * N = 2^15, r = 8, p = 1 uses 32 MiB and about 50-100 ms per hash: OWASP's minimum for scrypt. The
 * parameters are stored with each hash ("scrypt$N$r$p$salt$hash"), so they can be raised later
 * without invalidating existing passwords. PASSWORD_HASH_COST lowers N for test suites only (config.ts
 * refuses it elsewhere); verification always uses the parameters stored with the hash.
 */
const PRODUCTION_COST = 15;
let params = { N: 2 ** PRODUCTION_COST, r: 8, p: 1 };
const KEY_LENGTH = 32;
export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 200;

function derive(password: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: 256 * params.N * params.r };
  return new Promise((resolve, reject) => scrypt(password.normalize("NFKC"), salt, KEY_LENGTH, options, (error, key) => (error ? reject(error) : resolve(key))));
}

/** Sets log2(N) for hashes made from now on in this process (config.auth.passwordHashCost, at start). */
export function setPasswordHashCost(cost: number): void {
  if (params.N === 2 ** cost) return;
  params = { ...params, N: 2 ** cost };
  unknownUserHash_ = undefined; // the dummy must cost what a real user's check costs
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const used = params;
  const key = await derive(password, salt, used);
  return ["scrypt", used.N, used.r, used.p, salt.toString("base64url"), key.toString("base64url")].join("$");
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
