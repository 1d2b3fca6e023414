import { z } from "zod";
import type { Principal, UserRole } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import { ConflictError, NotFoundError, ValidationError } from "../../errors.ts";
import { generateApiKey, hashApiKey, looksLikeApiKey, type KeyMode } from "../../security/api-keys.ts";
import type { ApiKeyCache } from "./key-cache.ts";

const merchantInput = z.object({
  name: z.string().trim().min(1, "is required").max(200, "must be at most 200 characters"),
  email: z.email("must be a valid e-mail address").max(254),
  defaultCurrency: z
    .string()
    .regex(/^[A-Z]{3}$/, "must be an ISO 4217 code such as KES")
    .default("KES"),
});

const ROLE_RANK: Record<UserRole, number> = { viewer: 0, developer: 1, owner: 2 };

export interface IssuedKey {
  id: number;
  mode: KeyMode;
  role: UserRole;
  prefix: string;
  /** Shown once; only its hash is stored. */
  plaintext: string;
}

/** `keyCache` keeps verified keys in process (see key-cache.ts); without it every request looks its key up. */
export function createMerchantService(prisma: PrismaClient, options: { keyCache?: ApiKeyCache } = {}) {
  const { keyCache } = options;
  async function issueKey(db: Pick<PrismaClient, "apiKey">, merchantId: number, mode: KeyMode, role: UserRole = "owner", createdBy: number | null = null): Promise<IssuedKey> {
    const key = generateApiKey(mode);
    const row = await db.apiKey.create({ data: { merchantId, mode, role, createdBy, prefix: key.prefix, hash: key.hash }, select: { id: true } });
    return { id: row.id, mode, role, prefix: key.prefix, plaintext: key.plaintext };
  }

  return {
    /** Creates a merchant with one test and one live key, in one database transaction. */
    async createMerchant(input: { name: string; email: string; defaultCurrency?: string; isDemo?: boolean }) {
      const parsed = merchantInput.safeParse(input);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        throw new ValidationError(String(issue.path[0] ?? "input"), issue.message);
      }
      const { name, email, defaultCurrency } = parsed.data;
      if (await prisma.merchant.findUnique({ where: { email }, select: { id: true } })) {
        throw new ConflictError(`A merchant with email ${email} already exists`, "email");
      }
      return prisma.$transaction(async (tx) => {
        const merchant = await tx.merchant.create({ data: { name, email, defaultCurrency, isDemo: input.isDemo === true } });
        const test = await issueKey(tx, merchant.id, "test");
        const live = await issueKey(tx, merchant.id, "live");
        return { merchant, keys: { test, live } };
      });
    },

    listMerchants() {
      return prisma.merchant.findMany({
        orderBy: { id: "asc" },
        include: { apiKeys: { orderBy: { id: "asc" }, select: { prefix: true, mode: true, role: true, revokedAt: true } } },
      });
    },

    /**
     * A new key of one mode. `creator` is the signed-in user making it (the API): the key's role is at most theirs.
     * The operator's CLI passes none and may give any role (owner by default).
     */
    async createKey(merchantId: number, mode: KeyMode, options: { role?: UserRole | null; creator?: { userId: number; role: UserRole } } = {}): Promise<IssuedKey> {
      if (!(await prisma.merchant.findUnique({ where: { id: merchantId }, select: { id: true } }))) {
        throw new NotFoundError(`Merchant ${merchantId}`);
      }
      const { creator } = options;
      const role = options.role ?? creator?.role ?? "owner";
      if (creator && ROLE_RANK[role] > ROLE_RANK[creator.role]) {
        throw new ValidationError("role", `must be at most your own role (${creator.role}): a key never does more than whoever made it`);
      }
      return issueKey(prisma, merchantId, mode, role, creator?.userId ?? null);
    },

    /**
     * Revokes by the visible prefix; revoking twice is a no-op that still reports the key. `owner` limits
     * it to one merchant's keys of one mode (the API); the operator's CLI passes none.
     */
    async revokeKey(prefix: string, owner?: { merchantId: number; mode: KeyMode }) {
      const key = await prisma.apiKey.findUnique({ where: { prefix } });
      if (!key || (owner && (key.merchantId !== owner.merchantId || key.mode !== owner.mode))) throw new NotFoundError(`API key ${prefix}`);
      if (key.revokedAt) return key;
      const revoked = await prisma.apiKey.update({ where: { id: key.id }, data: { revokedAt: new Date() } });
      await keyCache?.revoked(key.id);
      return revoked;
    },

    /** The principal for a presented key, or null when it is missing, unknown or revoked. */
    async authenticate(presented: string | undefined): Promise<Principal | null> {
      if (!presented || !looksLikeApiKey(presented)) return null;
      const hash = hashApiKey(presented);
      const cached = keyCache?.get(hash);
      if (cached) return cached;
      const key = await prisma.apiKey.findUnique({
        where: { hash },
        select: { id: true, merchantId: true, mode: true, role: true, prefix: true, revokedAt: true },
      });
      if (!key || key.revokedAt) return null;
      // A key acts only in its mode, with the role it was given (src/authorization.ts).
      const principal: Principal = { merchantId: key.merchantId, mode: key.mode, role: key.role, userId: null, keyId: key.id, keyPrefix: key.prefix };
      keyCache?.set(hash, principal);
      return principal;
    },

    /** How many keys of the mode work (not revoked). */
    activeKeyCount(merchantId: number, mode: KeyMode): Promise<number> {
      return prisma.apiKey.count({ where: { merchantId, mode, revokedAt: null } });
    },

    getMerchant(id: number) {
      return prisma.merchant.findUnique({ where: { id } });
    },

    async hasAnyMerchant() {
      return (await prisma.merchant.count()) > 0;
    },
  };
}

export type MerchantService = ReturnType<typeof createMerchantService>;
