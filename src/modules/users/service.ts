import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { UserRole } from "../../auth.ts";
import type { PrismaClient } from "../../db/database.ts";
import { ConflictError, GatewayError, NotFoundError, ValidationError, isUniqueViolation } from "../../errors.ts";
import { rateLimitError } from "../../rate-limit/limiter.ts";
import type { KeyMode } from "../../security/api-keys.ts";
import type { LoginLimiter } from "./login-limiter.ts";
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, hashPassword, unknownUserHash, verifyPassword } from "./passwords.ts";
import { generateRefreshToken, hashRefreshToken, type AccessTokens } from "./tokens.ts";
import type { UserStates } from "./user-states.ts";

export const USER_ROLES: readonly UserRole[] = ["owner", "developer", "viewer"];

const email = z
  .string()
  .trim()
  .max(254, "must be at most 254 characters")
  .pipe(z.email("must be a valid e-mail address"))
  .transform((value) => value.toLowerCase());
const mode = z.enum(["test", "live"], { error: "must be test or live" });

const newUserInput = z.object({
  merchantId: z.number().int().positive(),
  email,
  password: z
    .string({ error: "is required" })
    .min(MIN_PASSWORD_LENGTH, `must be at least ${MIN_PASSWORD_LENGTH} characters`)
    .max(MAX_PASSWORD_LENGTH, `must be at most ${MAX_PASSWORD_LENGTH} characters`),
  role: z.enum(["owner", "developer", "viewer"], { error: "must be owner, developer or viewer" }),
});
const newPasswordInput = newUserInput.pick({ password: true });
const hashedUserInput = newUserInput.omit({ password: true });

const loginInput = z.object({
  email: z.string({ error: "is required" }).min(1, "is required").max(254, "must be at most 254 characters"),
  password: z.string({ error: "is required" }).min(1, "is required").max(MAX_PASSWORD_LENGTH, `must be at most ${MAX_PASSWORD_LENGTH} characters`),
  mode: mode.default("test"),
  merchant_id: z.number({ error: "must be a merchant id (a positive integer)" }).int("must be a merchant id (a positive integer)").positive("must be a merchant id (a positive integer)").optional(),
});


const refreshInput = z.object({
  refresh_token: z.string({ error: "is required" }).min(1, "is required").max(200, "is not a refresh token"),
  mode: mode.optional(),
});

function parse<T extends z.ZodType>(schema: T, input: unknown): z.output<T> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new ValidationError(issue.path.join(".") || "body", issue.message);
}

export type NewUser = {
  merchantId: number;
  email: string;
  role: string;
} & ({ password: string } | { passwordHash: string });

/**
 * A new user's password, checked and hashed. A caller inside a database transaction hashes first and passes
 * `passwordHash`: scrypt is slow by design, and on a busy machine it outlasted the transaction's timeout.
 */
export async function hashNewPassword(password: unknown): Promise<string> {
  return hashPassword(parse(newPasswordInput, { password }).password);
}

async function parseAndHash(input: unknown) {
  const data = parse(newUserInput, input);
  return { data, passwordHash: await hashPassword(data.password) };
}

/** Adds a user (also the CLI's `user create` and `setup`, which have no sessions to manage; setup passes its transaction). */
export async function createUser(prisma: Pick<PrismaClient, "merchant" | "user">, input: NewUser) {
  const { data, passwordHash } =
    "passwordHash" in input
      ? { data: parse(hashedUserInput, input), passwordHash: input.passwordHash }
      : await parseAndHash(input);
  if (!(await prisma.merchant.findUnique({ where: { id: data.merchantId }, select: { id: true } }))) throw new NotFoundError(`Merchant ${data.merchantId}`);
  try {
    return await prisma.user.create({
      data: { merchantId: data.merchantId, email: data.email, role: data.role, passwordHash },
      select: { id: true, merchantId: true, email: true, role: true, createdAt: true },
    });
  } catch (error) {
    // Unique per merchant: the answer says nothing of other merchants' users.
    if (isUniqueViolation(error)) throw new ConflictError(`This merchant already has a user with e-mail ${data.email}`, "email");
    throw error;
  }
}

/** What login and refresh answer (the body of POST /v1/auth/login and /refresh, under data). */
export interface Session {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
  refresh_token: string;
  user: { id: number; email: string; role: UserRole; merchant_id: number };
  mode: KeyMode;
}

export interface UserServiceDeps {
  prisma: PrismaClient;
  tokens: AccessTokens;
  loginLimiter: LoginLimiter;
  refreshTokenTtlMs: number;
  /** Told of every disable, role and password change: instances drop the user's state and close its connections. */
  userStates: UserStates;
}

/**
 * A merchant's team: users, their passwords, and their sessions. A session is a family of refresh tokens,
 * each usable once (rotation); presenting a used one means it was copied, so the whole family is revoked
 * (OAuth 2.0 Security Best Current Practice, section 4.14).
 */
export function createUserService(deps: UserServiceDeps) {
  const { prisma, tokens, loginLimiter, userStates } = deps;
  const invalidToken = () => new GatewayError("invalid_token", "The refresh token is invalid, expired or already used; sign in again");

  async function session(user: { id: number; email: string; role: UserRole; merchantId: number }, familyId: string, sessionMode: KeyMode, db: Pick<PrismaClient, "refreshToken"> = prisma): Promise<Session> {
    const refresh = generateRefreshToken();
    await db.refreshToken.create({
      data: { userId: user.id, familyId, hash: refresh.hash, mode: sessionMode, expiresAt: new Date(Date.now() + deps.refreshTokenTtlMs) },
    });
    return {
      access_token: await tokens.issue({ userId: user.id, merchantId: user.merchantId, role: user.role, mode: sessionMode }),
      token_type: "Bearer",
      expires_in: tokens.ttlSeconds,
      refresh_token: refresh.plaintext,
      user: { id: user.id, email: user.email, role: user.role, merchant_id: user.merchantId },
      mode: sessionMode,
    };
  }

  return {
    createUser: (input: NewUser) => createUser(prisma, input),

    listUsers(merchantId: number) {
      return prisma.user.findMany({ where: { merchantId }, orderBy: { id: "asc" }, select: { id: true, merchantId: true, email: true, role: true, createdAt: true } });
    },

    /** Owners who can still sign in. */
    activeOwnerCount(merchantId: number): Promise<number> {
      return prisma.user.count({ where: { merchantId, role: "owner", disabledAt: null } });
    },

    getUser(merchantId: number, id: number) {
      return prisma.user.findFirst({ where: { id, merchantId }, select: { id: true, merchantId: true, email: true, role: true, createdAt: true } });
    },

    /**
     * A wrong e-mail and a wrong password are the same 401 after the same work (an unknown e-mail is checked
     * against a dummy hash). Failures count against the e-mail's budget (whoever else signs in meanwhile: a
     * success never resets it), every attempt against the IP's.
     *
     * E-mail is unique per merchant, so one address may be a user at several. Without `merchant_id` the sign-in
     * checks a password only when the address has one user; with several it asks for the merchant first, before
     * and whatever the password, so the answer never depends on another merchant's users' passwords (a merchant
     * adding a user with someone else's address learns nothing by guessing through it).
     */
    async login(input: unknown, ip: string): Promise<Session> {
      const { email: presented, password, mode: sessionMode, merchant_id: merchantId } = parse(loginInput, input);
      const address = presented.trim().toLowerCase();
      const attempt = await loginLimiter.attempt(address, ip);
      if ("refused" in attempt) throw rateLimitError(attempt.refused);
      // From here every way out settles the attempt (the finally below), so its in-flight mark is always given back.
      try {
        const candidates = await prisma.user.findMany({
          // A disabled user signs in as if unknown.
          where: { email: address, disabledAt: null, ...(merchantId === undefined ? {} : { merchantId }) },
          orderBy: { id: "asc" },
          take: 2,
        });
        if (candidates.length > 1) {
          throw new ValidationError("merchant_id", "this e-mail signs in to more than one merchant; say which one (merchant_id)");
        }
        const user = candidates[0];
        const valid = await verifyPassword(password, user?.passwordHash ?? (await unknownUserHash()));
        await attempt.done(!valid || !user);
        if (!valid || !user) throw new GatewayError("invalid_credentials");
        return session(user, randomUUID(), sessionMode);
      } finally {
        await attempt.done(false); // a no-op once settled; otherwise (a database error) not a failure
      }
    },

    async refresh(input: unknown): Promise<Session> {
      const { refresh_token, mode: requestedMode } = parse(refreshInput, input);
      const hash = hashRefreshToken(refresh_token);
      const outcome = await prisma.$transaction(async (tx) => {
        const found = await tx.refreshToken.findUnique({ where: { hash }, select: { userId: true } });
        if (!found) return null;
        // The user's row is locked before the token is used: a disable or password change locks it too (its UPDATE
        // comes first), so either it waits for this refresh and then revokes the token this inserts, or this waits
        // for it and sees the user disabled, or its own token revoked. Nothing slips between them. Not FOR SHARE:
        // share locks of busy refreshes overlap and would starve the revocation's UPDATE; this one queues fairly.
        await tx.$queryRaw`SELECT id FROM users WHERE id = ${found.userId} FOR NO KEY UPDATE`;
        const token = await tx.refreshToken.findUnique({ where: { hash }, include: { user: true } });
        if (!token || token.revokedAt || token.expiresAt <= new Date() || token.user.disabledAt) return null;
        // Using the token up is a conditional update, so of two concurrent refreshes one wins and the
        // other is reuse: exactly one new token per old one.
        const used = await tx.refreshToken.updateMany({ where: { id: token.id, usedAt: null, revokedAt: null }, data: { usedAt: new Date() } });
        if (used.count === 0) return { reused: token.familyId } as const;
        return { session: await session(token.user, token.familyId, requestedMode ?? token.mode, tx) } as const;
      });
      if (!outcome) throw invalidToken();
      if ("reused" in outcome) {
        // Revoked outside the refresh's transaction so it holds even though the request fails.
        await prisma.refreshToken.updateMany({ where: { familyId: outcome.reused, revokedAt: null }, data: { revokedAt: new Date() } });
        throw invalidToken();
      }
      return outcome.session;
    },

    /** Gives another user of the team a new role; it applies at once, on every instance and open connection. */
    async changeRole(actor: Actor, userId: number, role: string) {
      const user = await changeUserRole(prisma, actor, userId, role);
      await userStates.changed(userId);
      return user;
    },

    /** Disables another user of the team: its sessions end and its open connections close, on every instance. */
    async disable(actor: Actor, userId: number) {
      const user = await disableUser(prisma, actor, userId);
      await userStates.changed(userId);
      return user;
    },

    /** The signed-in user's own password: every session of the user ends and its open connections close. */
    async changePassword(actor: Actor, currentPassword: string, password: string) {
      const user = await changeOwnPassword(prisma, actor, currentPassword, password);
      await userStates.changed(actor.userId);
      return user;
    },

    /** Ends the session the refresh token belongs to (every token of its family); unknown tokens are a 401. */
    async logout(input: unknown): Promise<void> {
      const { refresh_token } = parse(refreshInput, input);
      const token = await prisma.refreshToken.findUnique({ where: { hash: hashRefreshToken(refresh_token) }, select: { familyId: true } });
      if (!token) throw invalidToken();
      await prisma.refreshToken.updateMany({ where: { familyId: token.familyId, revokedAt: null }, data: { revokedAt: new Date() } });
    },
  };
}

export type UserService = ReturnType<typeof createUserService>;

// ---------------------------------------------------------------------------------------------------------------
// An owner manages the team; everyone changes their own password (the dashboard's Users page).

/** Who asks: a signed-in user of a merchant (API keys have no user to act as). */
export interface Actor {
  merchantId: number;
  userId: number;
}

const teamMember = { id: true, merchantId: true, email: true, role: true, createdAt: true, disabledAt: true } as const;
const roleInput = z.enum(["owner", "developer", "viewer"], { error: "must be owner, developer or viewer" });
const newPassword = z
  .string({ error: "is required" })
  .min(MIN_PASSWORD_LENGTH, `must be at least ${MIN_PASSWORD_LENGTH} characters`)
  .max(MAX_PASSWORD_LENGTH, `must be at most ${MAX_PASSWORD_LENGTH} characters`);

/** Another user of the actor's merchant; yourself is refused, so an owner can never lock the team out of owning it. */
async function otherTeamMember(prisma: PrismaClient, actor: Actor, userId: number, what: string) {
  if (userId === actor.userId) throw new GatewayError("forbidden", `You cannot ${what} yourself; ask another owner`);
  const user = await prisma.user.findFirst({ where: { id: userId, merchantId: actor.merchantId }, select: teamMember });
  if (!user) throw new NotFoundError(`User ${userId}`);
  return user;
}

/** Takes effect at once: every request checks the user's current role (user-states.ts), whatever its token says. */
export async function changeUserRole(prisma: PrismaClient, actor: Actor, userId: number, role: string) {
  const parsed = roleInput.safeParse(role);
  if (!parsed.success) throw new ValidationError("role", parsed.error.issues[0]!.message);
  await otherTeamMember(prisma, actor, userId, "change the role of");
  return prisma.user.update({ where: { id: userId }, data: { role: parsed.data }, select: teamMember });
}

/**
 * The user can no longer sign in, every session it has ends (its refresh tokens are revoked) and its access tokens
 * are refused from now on (user-states.ts). Disabling twice is the same as once.
 */
export async function disableUser(prisma: PrismaClient, actor: Actor, userId: number) {
  const user = await otherTeamMember(prisma, actor, userId, "disable");
  if (user.disabledAt) return user;
  // The user's row first (its lock orders this against a refresh in flight: see refresh), then its tokens.
  return prisma.$transaction(async (tx) => {
    const disabled = await tx.user.update({ where: { id: userId }, data: { disabledAt: new Date() }, select: teamMember });
    await tx.refreshToken.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: new Date() } });
    return disabled;
  });
}

/**
 * The signed-in user's own password, proven by the current one (a stolen session alone cannot take the account over).
 * Every session of the user ends (refresh tokens revoked), so one opened with the old password cannot outlive it;
 * this one too, at its next refresh: sign in again with the new password.
 */
export async function changeOwnPassword(prisma: PrismaClient, actor: Actor, currentPassword: string, password: string) {
  const parsed = newPassword.safeParse(password);
  if (!parsed.success) throw new ValidationError("newPassword", parsed.error.issues[0]!.message);
  const user = await prisma.user.findFirst({ where: { id: actor.userId, merchantId: actor.merchantId, disabledAt: null } });
  if (!user) throw new NotFoundError(`User ${actor.userId}`);
  if (!(await verifyPassword(currentPassword, user.passwordHash))) throw new ValidationError("currentPassword", "is not your current password");
  const passwordHash = await hashPassword(parsed.data);
  return prisma.$transaction(async (tx) => {
    const updated = await tx.user.update({ where: { id: user.id }, data: { passwordHash }, select: teamMember });
    await tx.refreshToken.updateMany({ where: { userId: user.id, revokedAt: null }, data: { revokedAt: new Date() } });
    return updated;
  });
}
