import { createHash, hkdfSync, randomBytes } from "node:crypto";
import { decodeJwt, errors as joseErrors, jwtVerify, SignJWT } from "jose";
import type { Principal, UserRole } from "../../auth.ts";
import type { KeyMode } from "../../security/api-keys.ts";

/**
 * Access tokens: HS256 JWTs (jose) that carry everything a request needs (merchant, mode, role), so
 * checking one costs an HMAC and no database read. They live ACCESS_TOKEN_TTL_SECONDS (15 minutes):
 * signing out or removing a user takes effect when the refresh token is refused, within that time.
 *
 * The signing key is JWT_SECRET when set; otherwise it is derived (HKDF) from the encryption key, which
 * every instance on one PostgreSQL already shares and the embedded default keeps in DATA_DIR. Either
 * way all instances verify each other's tokens with no extra setup.
 */
const ISSUER = "payment-gateway";
const AUDIENCE = "payment-gateway:api";
const ROLES: readonly UserRole[] = ["owner", "developer", "viewer"];

export interface AccessTokenSubject {
  userId: number;
  merchantId: number;
  role: UserRole;
  mode: KeyMode;
}

export function signingKeyFrom(jwtSecret: string | undefined, encryptionKey: Buffer): Uint8Array {
  if (jwtSecret) return new TextEncoder().encode(jwtSecret);
  return new Uint8Array(hkdfSync("sha256", encryptionKey, Buffer.alloc(0), "payment-gateway access tokens v1", 32));
}

export function createAccessTokens(key: Uint8Array, ttlSeconds: number) {
  return {
    ttlSeconds,

    issue(subject: AccessTokenSubject): Promise<string> {
      return new SignJWT({ mid: subject.merchantId, mode: subject.mode, role: subject.role })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setSubject(String(subject.userId))
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setIssuedAt()
        .setExpirationTime(`${ttlSeconds}s`)
        .setJti(randomBytes(12).toString("base64url"))
        .sign(key);
    },

    /** The principal a valid token grants; null when it is malformed, tampered with, expired or not ours. */
    async verify(token: string): Promise<Principal | null> {
      if (token.length > 4096) return null;
      try {
        const { payload } = await jwtVerify(token, key, { issuer: ISSUER, audience: AUDIENCE, algorithms: ["HS256"], requiredClaims: ["exp", "sub"] });
        const userId = Number(payload.sub);
        const merchantId = payload.mid;
        const { mode, role } = payload;
        if (!Number.isSafeInteger(userId) || typeof merchantId !== "number" || !Number.isSafeInteger(merchantId)) return null;
        if ((mode !== "test" && mode !== "live") || !ROLES.includes(role as UserRole)) return null;
        return { merchantId, mode, role: role as UserRole, userId, keyId: null, keyPrefix: null };
      } catch (error) {
        if (error instanceof joseErrors.JOSEError) return null;
        throw error;
      }
    },
  };
}

export type AccessTokens = ReturnType<typeof createAccessTokens>;

/** When a token says it expires (epoch ms), read without verifying it: only to time a check that verifies. */
export function expiryOf(token: string): number | undefined {
  try {
    const { exp } = decodeJwt(token);
    return typeof exp === "number" ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/** Refresh tokens are opaque and random; only their SHA-256 is stored (256 bits: no brute force). */
export function generateRefreshToken(): { plaintext: string; hash: string } {
  const plaintext = `rt_${randomBytes(32).toString("base64url")}`;
  return { plaintext, hash: hashRefreshToken(plaintext) };
}

export function hashRefreshToken(plaintext: string): string {
  return createHash("sha256").update(plaintext, "utf8").digest("hex");
}
