import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { Customer } from "../customers/schema.ts";
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
