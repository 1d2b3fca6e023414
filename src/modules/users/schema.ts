import { allows } from "../../authorization.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { GatewayError } from "../../errors.ts";
import type { GraphQLContext } from "../../graphql/context.ts";
import { UserRoleEnum } from "../merchants/schema.ts";

/** The merchant's team: who is signed in, and (owners) who else can sign in. */

builder.prismaNode("User", {
  id: { field: "id" },
  // The team is the signed-in owners' to see (the `users` field's permission); anyone else finds only themselves.
  findUnique: (id, ctx) => {
    const wanted = Number.isSafeInteger(Number(id)) ? Number(id) : -1;
    const visible = allows(ctx.principal, "signed_in_owner") || wanted === ctx.principal?.userId;
    return { id: visible ? wanted : -1, merchantId: ctx.principal?.merchantId ?? -1 };
  },
  fields: (t) => ({
    databaseId: t.exposeInt("id"),
    email: t.exposeString("email"),
    role: t.expose("role", { type: UserRoleEnum }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    disabledAt: t.expose("disabledAt", { type: "DateTime", nullable: true, description: "Set when an owner disabled the user: it can no longer sign in." }),
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
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreateUserInput, required: true }) },
    resolve: async (query, _root, { input }, ctx) => {
      const user = await ctx.services.users.createUser({ merchantId: ctx.principal!.merchantId, ...input });
      return ctx.prisma.user.findUniqueOrThrow({ ...query, where: { id: user.id } });
    },
  }),
);

/** The acting user (the table lets only signed-in owners manage the team). */
const actorOf = (ctx: GraphQLContext) => ({ merchantId: ctx.principal!.merchantId, userId: ctx.principal!.userId ?? -1 });

const ChangeUserRoleInput = builder.inputType("ChangeUserRoleInput", {
  fields: (t) => ({
    id: t.int({ required: true, description: "The user's databaseId." }),
    role: t.field({ type: UserRoleEnum, required: true }),
  }),
});

builder.mutationField("changeUserRole", (t) =>
  t.prismaField({
    type: "User",
    description: "Gives another user of the team a new role (not yourself). It applies at once, to tokens already issued and open connections (which close). Signed-in owners only.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: ChangeUserRoleInput, required: true }) },
    resolve: async (query, _root, { input }, ctx) => {
      const user = await ctx.services.users.changeRole(actorOf(ctx), input.id, input.role);
      return ctx.prisma.user.findUniqueOrThrow({ ...query, where: { id: user.id } });
    },
  }),
);

builder.mutationField("disableUser", (t) =>
  t.prismaField({
    type: "User",
    description: "Stops another user of the team from signing in and ends its sessions (not yourself). Owners only.",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true, description: "The user's databaseId." }) },
    resolve: async (query, _root, { id }, ctx) => {
      const user = await ctx.services.users.disable(actorOf(ctx), id);
      return ctx.prisma.user.findUniqueOrThrow({ ...query, where: { id: user.id } });
    },
  }),
);

const ChangePasswordInput = builder.inputType("ChangePasswordInput", {
  fields: (t) => ({
    currentPassword: t.string({ required: true }),
    newPassword: t.string({ required: true, description: "At least 10 characters." }),
  }),
});

builder.mutationField("changePassword", (t) =>
  t.prismaField({
    type: "User",
    description: "The signed-in user's own password, in either mode and whatever the role; needs the current one.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: ChangePasswordInput, required: true }) },
    resolve: async (query, _root, { input }, ctx) => {
      if (ctx.principal!.userId == null) throw new GatewayError("forbidden", "Only a signed-in user has a password to change; an API key has none");
      const user = await ctx.services.users.changePassword({ merchantId: ctx.principal!.merchantId, userId: ctx.principal!.userId }, input.currentPassword, input.newPassword);
      return ctx.prisma.user.findUniqueOrThrow({ ...query, where: { id: user.id } });
    },
  }),
);
