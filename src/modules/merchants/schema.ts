import { builder } from "../../graphql/builder.ts";

export const ModeEnum = builder.enumType("Mode", {
  description: "Test-mode and live-mode objects never mix: every key, and everything it creates, has one mode.",
  values: ["test", "live"] as const,
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
