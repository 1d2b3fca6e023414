import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { Customer } from "../customers/schema.ts";
import { Transaction } from "../transactions/schema.ts";
import { maskMsisdn } from "../transactions/attempts.ts";

/**
 * Saved payment methods: thin resolvers over services.paymentMethods (REST /v1 runs these too). Only what a payer
 * would recognise is exposed (brand, last four, expiry, bank; a masked phone): the provider's token and the
 * fingerprint never are.
 */

interface CardView {
  brand: string | null;
  last4: string | null;
  expMonth: number | null;
  expYear: number | null;
  bank: string | null;
}

const PaymentMethodCard = builder.objectRef<CardView>("PaymentMethodCard").implement({
  fields: (t) => ({
    brand: t.exposeString("brand", { nullable: true, description: "visa, mastercard, verve, ... lower-cased." }),
    last4: t.exposeString("last4", { nullable: true }),
    expMonth: t.exposeInt("expMonth", { nullable: true, description: "1 to 12." }),
    expYear: t.exposeInt("expYear", { nullable: true, description: "Four digits." }),
    bank: t.exposeString("bank", { nullable: true }),
  }),
});

const PaymentMethodMpesa = builder.objectRef<{ phone: string }>("PaymentMethodMpesa").implement({
  fields: (t) => ({ phone: t.exposeString("phone", { description: "Masked: 2547*****149." }) }),
});

export const PaymentMethod = builder.prismaObject("PaymentMethod", {
  description: "A customer's card or M-Pesa phone, saved with the payer's consent and charged later without them (POST /v1/charges).",
  fields: (t) => ({
    id: t.exposeString("reference", { description: "pm_..." }),
    type: t.exposeString("type", { description: "card or mpesa." }),
    card: t.field({
      type: PaymentMethodCard,
      nullable: true,
      resolve: (m) => (m.type === "card" ? { brand: m.cardBrand, last4: m.cardLast4, expMonth: m.cardExpMonth, expYear: m.cardExpYear, bank: m.cardBank } : null),
    }),
    mpesa: t.field({ type: PaymentMethodMpesa, nullable: true, resolve: (m) => (m.type === "mpesa" && m.phone ? { phone: maskMsisdn(m.phone) } : null) }),
    reusable: t.exposeBoolean("reusable", { description: "Only a reusable method may be charged." }),
    customerId: t.exposeInt("customerId", { description: "The customer's databaseId." }),
    detachedAt: t.expose("detachedAt", { type: "DateTime", nullable: true, description: "Set once detached: it can never be charged again." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
  }),
});

builder.objectField(Customer, "paymentMethods", (t) =>
  t.field({
    type: [PaymentMethod],
    description: "Its attached saved payment methods, newest first.",
    resolve: (customer, _args, ctx) => ctx.services.paymentMethods.listOfCustomer(ctx.principal!, customer.id),
  }),
);

builder.mutationField("detachPaymentMethod", (t) =>
  t.field({
    type: PaymentMethod,
    description: "Detaches a saved payment method for good: it can never be charged again (detaching twice is harmless).",
    errors: { types: businessErrors },
    args: { id: t.arg.string({ required: true, description: "pm_..." }) },
    resolve: (_root, { id }, ctx) => ctx.services.paymentMethods.detach(ctx.principal!, id),
  }),
);

export const NextAction = builder.objectRef<{ type: "redirect"; url: string }>("NextAction").implement({
  description: "What the payer must do before the charge can complete (their bank wants them: 2FA).",
  fields: (t) => ({
    type: t.exposeString("type", { description: "redirect: send the payer to url." }),
    url: t.exposeString("url", { description: "The checkout page where the payer finishes." }),
  }),
});

const ChargePaymentMethodInput = builder.inputType("ChargePaymentMethodInput", {
  fields: (t) => ({
    customer: t.int({ required: true, description: "The customer's databaseId." }),
    paymentMethod: t.string({ required: true, description: "pm_..., one of the customer's attached methods." }),
    amount: t.field({ type: "BigInt", required: true, description: "Positive integer in the currency's minor unit." }),
    currency: t.string({ required: true, description: "ISO 4217; one the method's channel takes." }),
    reference: t.string({ description: "Your own reference (at most 100 characters), kept as clientReference." }),
    description: t.string({ description: "At most 500 characters." }),
    metadata: t.field({ type: "JSON", description: "A JSON object of yours, at most 8 KB serialized." }),
  }),
});

const ChargePaymentMethodPayload = builder
  .objectRef<{ transaction: unknown; nextAction: { type: "redirect"; url: string } | null; paymentMethodId: number | null }>("ChargePaymentMethodPayload")
  .implement({
    fields: (t) => ({
      transaction: t.field({ type: Transaction, resolve: (p) => p.transaction as never }),
      nextAction: t.field({ type: NextAction, nullable: true, resolve: (p) => p.nextAction }),
      paymentMethod: t.prismaField({
        type: "PaymentMethod",
        nullable: true,
        resolve: (query, p, _args, ctx) => (p.paymentMethodId === null ? null : ctx.prisma.paymentMethod.findUnique({ ...query, where: { id: p.paymentMethodId } })),
      }),
    }),
  });

builder.mutationField("chargePaymentMethod", (t) =>
  t.field({
    type: ChargePaymentMethodPayload,
    description:
      "Charges a customer's saved payment method without the payer. Needs an Idempotency-Key (one key, at most one charge). " +
      "A card completes or fails at once, or waits for the payer (nextAction); an M-Pesa method sends a prompt the payer approves on the phone (pending).",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: ChargePaymentMethodInput, required: true }) },
    resolve: async (_root, { input }, ctx) => {
      const { transaction, nextAction } = await ctx.services.transactions.chargeSavedMethod(ctx.principal!, input);
      return { transaction, nextAction, paymentMethodId: transaction.paymentMethodId };
    },
  }),
);
