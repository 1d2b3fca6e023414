import type { KeyMode } from "./security/api-keys.ts";
import type { IdempotencyScope } from "./idempotency/scope.ts";

export type UserRole = "owner" | "developer" | "viewer";

/**
 * Who is calling: a merchant in one mode, by an API key or by a signed-in user's bearer token. Every
 * read and write is scoped by both merchant and mode.
 */
export interface Principal {
  merchantId: number;
  mode: KeyMode;
  /**
   * What the caller may do (src/authorization.ts): a user's role, or the role an API key was given at creation
   * (at most its creator's). A user's is read afresh on every request, so a change of role applies at once.
   */
  role: UserRole;
  /** The signed-in user (bearer token); null for an API key. */
  userId: number | null;
  /** The API key (id and visible prefix); null for a user. */
  keyId: number | null;
  keyPrefix: string | null;
  /** The Idempotency-Key its request holds, if any: what that request creates records its recovery point there. */
  idempotency?: IdempotencyScope | undefined;
}

/**
 * What a request presents: an API key (X-API-Key, everywhere) or a signed-in user's access token
 * (Authorization: Bearer, on /v1 and GraphQL). A key wins when both are sent.
 */
export type Credential = { apiKey: string } | { bearer: string } | undefined;

export function credentialFrom(apiKey: string | undefined, authorization: string | undefined, bearerAllowed: boolean): Credential {
  if (apiKey !== undefined) return { apiKey };
  if (!bearerAllowed || authorization === undefined) return undefined;
  const match = /^Bearer +(\S+)\s*$/i.exec(authorization);
  return match ? { bearer: match[1]! } : undefined;
}

export interface Authenticator {
  /**
   * The rate-limit budget a credential spends, decided before any database lookup: a well-formed key's
   * own budget (named by the key), or its merchant's for a valid access token (an HMAC check, no
   * lookup), so a dashboard's many queries never look like key guessing. Undefined for none,
   * or one that cannot be valid: the request then spends its IP's budget.
   */
  budget(credential: Credential): Promise<string | undefined>;
  /**
   * The principal, or null for a missing, unknown, revoked, expired or tampered-with credential, or a disabled
   * user's token. A user's role is the one they have now, not the one their token was issued with.
   */
  authenticate(credential: Credential): Promise<Principal | null>;
}

export function createAuthenticator(deps: {
  apiKeys: { authenticate(key: string | undefined): Promise<Principal | null>; looksValid(key: string): boolean };
  accessTokens: { verify(token: string): Promise<Principal | null> };
  /** The signed-in user's merchant and role now (null: disabled or gone); a token's own claims may be stale. */
  userStates: { current(userId: number): Promise<{ merchantId: number; role: UserRole } | null> };
}): Authenticator {
  async function verifyUser(token: string): Promise<Principal | null> {
    const claimed = await deps.accessTokens.verify(token);
    if (!claimed || claimed.userId === null) return null;
    const state = await deps.userStates.current(claimed.userId);
    if (!state || state.merchantId !== claimed.merchantId) return null;
    return state.role === claimed.role ? claimed : { ...claimed, role: state.role };
  }
  return {
    async budget(credential) {
      if (!credential) return undefined;
      if ("apiKey" in credential) return deps.apiKeys.looksValid(credential.apiKey) ? credential.apiKey : undefined;
      const principal = await deps.accessTokens.verify(credential.bearer);
      return principal ? `merchant:${principal.merchantId}` : undefined;
    },
    authenticate(credential) {
      if (!credential) return Promise.resolve(null);
      return "apiKey" in credential ? deps.apiKeys.authenticate(credential.apiKey) : verifyUser(credential.bearer);
    },
  };
}

/** The rows a principal may see: its merchant's, in its mode (every query on merchant data is scoped by this). */
export const scopeOf = (principal: Principal) => ({ merchantId: principal.merchantId, mode: principal.mode });

/** scopeOf for a GraphQL Node lookup, where no principal matches no row. */
export const nodeScopeOf = (principal: Principal | null) => ({ merchantId: principal?.merchantId ?? -1, mode: principal?.mode ?? ("test" as const) });

/** A Node's row by its id, in the caller's merchant and mode; an id that is not a safe integer finds nothing. */
export const ownedNode = (id: string, principal: Principal | null) => ({ id: Number.isSafeInteger(Number(id)) ? Number(id) : -1, ...nodeScopeOf(principal) });
