import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { USER_ROLES } from "./service.ts";

/** The merchant's team: who is signed in, and (owners) who else can sign in. */
const UserRoleEnum = builder.enumType("UserRole", {
  description: "viewer reads; developer also changes test-mode data; owner does everything (live mode, payouts, users).",
  values: USER_ROLES,
});

builder.prismaNode("User", {
  id: { field: "id" },
  findUnique: (id, ctx) => ({ id: Number.isSafeInteger(Number(id)) ? Number(id) : -1, merchantId: ctx.principal?.merchantId ?? -1 }),
  fields: (t) => ({
    databaseId: t.exposeInt("id"),
    email: t.exposeString("email"),
    role: t.expose("role", { type: UserRoleEnum }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

builder.queryFields((t) => ({
  currentUser: t.prismaField({
    type: "User",
    nullable: true,
    description: "The signed-in user; null when the caller uses an API key.",
    resolve: (query, _root, _args, ctx) =>
      ctx.principal?.userId == null ? null : ctx.prisma.user.findFirst({ ...query, where: { id: ctx.principal.userId, merchantId: ctx.principal.merchantId } }),
  }),
  users: t.prismaField({
    type: ["User"],
    description: "Everyone who can sign in to this merchant. Owners only.",
    authScopes: { owner: true },
    resolve: (query, _root, _args, ctx) => ctx.prisma.user.findMany({ ...query, where: { merchantId: ctx.principal!.merchantId }, orderBy: { id: "asc" } }),
  }),
}));

const CreateUserInput = builder.inputType("CreateUserInput", {
  fields: (t) => ({
    email: t.string({ required: true }),
    password: t.string({ required: true, description: "At least 10 characters; stored only as a scrypt hash." }),
    role: t.field({ type: UserRoleEnum, required: true }),
  }),
});

builder.mutationField("createUser", (t) =>
  t.prismaField({
    type: "User",
    description: "Adds a person to the merchant's team. Owners only.",
    authScopes: { owner: true },
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreateUserInput, required: true }) },
    resolve: async (query, _root, { input }, ctx) => {
      const user = await ctx.services.users.createUser({ merchantId: ctx.principal!.merchantId, ...input });
      return ctx.prisma.user.findUniqueOrThrow({ ...query, where: { id: user.id } });
    },
  }),
);
