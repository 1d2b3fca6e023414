import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";

export const ModeEnum = builder.enumType("Mode", {
  description: "Test-mode and live-mode objects never mix: every key, and everything it creates, has one mode.",
  values: ["test", "live"] as const,
});

/** A user's role, and an API key's (src/authorization.ts has what each may do). */
export const UserRoleEnum = builder.enumType("UserRole", {
  description: "viewer reads; developer also changes test-mode data; owner does everything (live mode, payouts; signed in: users, brand).",
  values: ["owner", "developer", "viewer"] as const,
});

builder.prismaNode("Merchant", {
  id: { field: "id" },
  // A merchant may only ever load itself through node(id).
  findUnique: (id, ctx) => ({ id: ctx.principal && Number(id) === ctx.principal.merchantId ? Number(id) : -1 }),
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API." }),
    name: t.exposeString("name"),
    email: t.exposeString("email"),
    defaultCurrency: t.exposeString("defaultCurrency", { description: "Used when a transaction names no currency." }),
    timezone: t.exposeString("timezone", { description: "The merchant's time zone (IANA name; Brand settings): the days of its figures, lists' date filters and reports." }),
    mode: t.field({
      type: ModeEnum,
      description: "The mode of the API key making this request.",
      resolve: (_merchant, _args, ctx) => ctx.principal!.mode,
    }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

builder.queryField("viewer", (t) =>
  t.prismaField({
    type: "Merchant",
    description: "The merchant that owns the API key making this request.",
    resolve: (query, _root, _args, ctx) =>
      ctx.prisma.merchant.findUniqueOrThrow({ ...query, where: { id: ctx.principal!.merchantId } }),
  }),
);

/** API keys of the caller's mode: listed by their visible prefix; a new key's secret is shown once. */
const ApiKey = builder.prismaObject("ApiKey", {
  fields: (t) => ({
    databaseId: t.exposeInt("id"),
    prefix: t.exposeString("prefix", { description: "The key's first characters (sk_test_Ab12Cd34); not enough to authenticate." }),
    mode: t.expose("mode", { type: ModeEnum }),
    role: t.expose("role", { type: UserRoleEnum, description: "What the key may do (the README's authorization table): at most the role of whoever made it." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    revokedAt: t.expose("revokedAt", { type: "DateTime", nullable: true }),
  }),
});

const CreatedApiKey = builder.objectRef<{ apiKey: { id: number }; secret: string }>("CreatedApiKey").implement({
  fields: (t) => ({
    apiKey: t.prismaField({
      type: ApiKey,
      resolve: (query, created, _args, ctx) => ctx.prisma.apiKey.findUniqueOrThrow({ ...query, where: { id: created.apiKey.id } }),
    }),
    secret: t.exposeString("secret", { description: "The whole key. Shown once: only its hash is stored." }),
  }),
});

builder.queryField("apiKeys", (t) =>
  t.prismaField({
    type: [ApiKey],
    description: "The merchant's API keys in the caller's mode, newest first, revoked ones included.",
    resolve: (query, _root, _args, ctx) =>
      ctx.prisma.apiKey.findMany({ ...query, where: { merchantId: ctx.principal!.merchantId, mode: ctx.principal!.mode }, orderBy: { id: "desc" } }),
  }),
);

builder.mutationFields((t) => ({
  createApiKey: t.field({
    type: CreatedApiKey,
    description:
      "A new secret key in the caller's mode, made by a signed-in user (owners; developers in test mode). Its role is at most the creator's, and the creator's when not given.",
    errors: { types: businessErrors },
    args: { role: t.arg({ type: UserRoleEnum, required: false }) },
    resolve: async (_root, { role }, ctx) => {
      const principal = ctx.principal!;
      // The table lets only signed-in users here (never a key), so there is always a creator.
      const key = await ctx.services.merchants.createKey(principal.merchantId, principal.mode, { role, creator: { userId: principal.userId!, role: principal.role } });
      return { apiKey: { id: key.id }, secret: key.plaintext };
    },
  }),
  revokeApiKey: t.prismaField({
    type: ApiKey,
    description: "Stops a key working at once, on every instance. Revoking twice is harmless.",
    errors: { types: businessErrors },
    args: { prefix: t.arg.string({ required: true }) },
    resolve: async (query, _root, { prefix }, ctx) => {
      const key = await ctx.services.merchants.revokeKey(prefix, { merchantId: ctx.principal!.merchantId, mode: ctx.principal!.mode });
      return ctx.prisma.apiKey.findUniqueOrThrow({ ...query, where: { id: key.id } });
    },
  }),
}));
