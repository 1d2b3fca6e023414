import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { offsetPageType } from "../../graphql/offset-page.ts";
import { PHONE_INPUT_DESCRIPTION } from "../../phone.ts";

export const Customer = builder.prismaNode("Customer", {
  id: { field: "id" },
  // node(id) only finds the caller's own customers, in the caller's mode.
  findUnique: (id, ctx) => ({
    id: Number.isSafeInteger(Number(id)) ? Number(id) : -1,
    merchantId: ctx.principal?.merchantId ?? -1,
    mode: ctx.principal?.mode ?? "test",
  }),
  fields: (t) => ({
    databaseId: t.exposeInt("id", { description: "The integer id used by the REST API." }),
    email: t.exposeString("email", { description: "Stored lower-cased; unique per merchant and mode." }),
    firstName: t.exposeString("firstName", { nullable: true }),
    lastName: t.exposeString("lastName", { nullable: true }),
    phone: t.exposeString("phone", { nullable: true, description: "E.164, e.g. +254712345678." }),
    metadata: t.expose("metadata", { type: "JSON", nullable: true, description: "Your own JSON object, as sent to POST /v1/customers." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

const CustomerPage = offsetPageType("CustomerPage", Customer);

const CreateCustomerInput = builder.inputType("CreateCustomerInput", {
  fields: (t) => ({
    email: t.string({ required: true }),
    firstName: t.string({ description: "At most 100 characters." }),
    lastName: t.string({ description: "At most 100 characters." }),
    phone: t.string({ description: PHONE_INPUT_DESCRIPTION }),
    metadata: t.field({ type: "JSON", description: "A JSON object of yours, at most 8 KB serialized." }),
    testClock: t.string({ description: "Test mode: a test clock's id (clock_...); the customer's subscriptions then bill on the clock's time." }),
  }),
});

builder.queryField("customers", (t) =>
  t.field({
    type: CustomerPage,
    description: "Newest first. `search` matches part of a name, e-mail or phone, ignoring case.",
    errors: { types: businessErrors },
    args: {
      search: t.arg.string({ description: "At most 100 characters." }),
      page: t.arg.int({ description: "From 1; default 1." }),
      limit: t.arg.int({ description: "1 to 100; default 20." }),
    },
    resolve: (_root, args, ctx) => ctx.services.customers.listCustomers(ctx.principal!, args),
  }),
);

builder.mutationField("createCustomer", (t) =>
  t.field({
    type: Customer,
    errors: { types: businessErrors },
    args: { input: t.arg({ type: CreateCustomerInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const { testClock, ...customer } = input;
      const testClockId = testClock ? await ctx.services.billing.clockIdOf(ctx.principal!, testClock) : null;
      return ctx.services.customers.createCustomer(ctx.principal!, { ...customer, testClockId });
    },
  }),
);

builder.queryField("customer", (t) =>
  t.field({
    type: Customer,
    description: "One of the caller's customers, by its databaseId (the id /v1/customers shows).",
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.customers.getCustomer(ctx.principal!, id),
  }),
);
