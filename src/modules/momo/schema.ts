import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import type { Transaction as TransactionRow } from "../../db/generated/prisma/client.ts";
import { Transaction, TransactionStatusEnum } from "../transactions/schema.ts";
import { MSISDN_INPUT_DESCRIPTION } from "../../phone.ts";

/** Mobile money: thin resolvers over services.momo (the REST /api/momo rows run these too). */

const StartStkPushInput = builder.inputType("StartStkPushInput", {
  fields: (t) => ({
    amount: t.field({ type: "BigInt", required: true, description: "KES minor units; a whole number of shillings (150000 is KES 1,500), KES 1 to 250,000." }),
    phoneNumber: t.string({ required: true, description: MSISDN_INPUT_DESCRIPTION }),
    paymentChannelId: t.int({ required: false, description: "An mpesa or sandbox channel; defaults to the merchant's default channel." }),
    reference: t.string({ required: false, description: "The merchant's own reference (AccountReference, cut to 12 characters)." }),
    description: t.string({ required: false, description: "TransactionDesc, cut to 13 characters for M-Pesa." }),
    metadata: t.field({ type: "JSON", required: false, description: "A JSON object of yours, at most 8 KB serialized, kept on the transaction (as initialize's)." }),
  }),
});

const StartStkPushPayload = builder.objectRef<{ transaction: TransactionRow; customerMessage: string }>("StartStkPushPayload").implement({
  fields: (t) => ({
    transaction: t.field({ type: Transaction, resolve: (p) => p.transaction as never }),
    customerMessage: t.exposeString("customerMessage", { description: "The provider's message for the customer." }),
  }),
});

const C2bResponseType = builder.enumType("C2bResponseType", {
  description: "What M-Pesa does when the validation URL does not answer in time.",
  values: ["Completed", "Cancelled"] as const,
});

const RegisterC2bUrlsInput = builder.inputType("RegisterC2bUrlsInput", {
  fields: (t) => ({
    paymentChannelId: t.int({ required: false }),
    confirmationUrl: t.string({ required: true, description: "The merchant's URL; the gateway forwards confirmations to it." }),
    validationUrl: t.string({ required: true, description: "The merchant's URL; the gateway relays validations to it." }),
    responseType: t.field({ type: C2bResponseType, required: false, description: "Default Completed." }),
  }),
});

const RegisterC2bUrlsPayload = builder
  .objectRef<{ confirmationUrl: string; validationUrl: string; responseType: "Completed" | "Cancelled" }>("RegisterC2bUrlsPayload")
  .implement({
    fields: (t) => ({
      confirmationUrl: t.exposeString("confirmationUrl"),
      validationUrl: t.exposeString("validationUrl"),
      responseType: t.field({ type: C2bResponseType, resolve: (p) => p.responseType }),
    }),
  });

const SimulateC2bInput = builder.inputType("SimulateC2bInput", {
  fields: (t) => ({
    paymentChannelId: t.int({ required: false }),
    amount: t.field({ type: "BigInt", required: true, description: "KES minor units, a whole number of shillings." }),
    phoneNumber: t.string({ required: true, description: MSISDN_INPUT_DESCRIPTION }),
    reference: t.string({ required: true, description: "BillRefNumber (account number)." }),
  }),
});

const SimulateC2bPayload = builder
  .objectRef<{ amount: bigint; phoneNumber: string; reference: string; status: "pending" | "completed" | "failed"; transaction: TransactionRow | null }>("SimulateC2bPayload")
  .implement({
    fields: (t) => ({
      amount: t.expose("amount", { type: "BigInt" }),
      phoneNumber: t.exposeString("phoneNumber"),
      reference: t.exposeString("reference"),
      status: t.field({ type: TransactionStatusEnum, resolve: (p) => p.status, description: "pending only while an mpesa sandbox confirmation has not arrived yet." }),
      transaction: t.field({ type: Transaction, nullable: true, resolve: (p) => p.transaction as never }),
    }),
  });

builder.mutationFields((t) => ({
  startStkPush: t.field({
    type: StartStkPushPayload,
    description: "Sends an M-Pesa STK push to the customer's phone; the transaction stays pending until M-Pesa answers.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: StartStkPushInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.transactions.startStkCollection(ctx.principal!, input),
  }),
  registerC2bUrls: t.field({
    type: RegisterC2bUrlsPayload,
    description: "Registers the gateway's C2B callbacks with M-Pesa and stores the merchant's URLs to relay to.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: RegisterC2bUrlsInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.momo.registerC2bUrls(ctx.principal!, input),
  }),
  simulateC2b: t.field({
    type: SimulateC2bPayload,
    description: "Sandbox channels only: a customer-to-business payment, recorded as a completed transaction.",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: SimulateC2bInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.momo.simulateC2b(ctx.principal!, input),
  }),
}));

builder.queryField("stkStatus", (t) =>
  t.field({
    type: Transaction,
    description: "An STK push transaction by reference (the same as transaction(reference)).",
    errors: { types: businessErrors },
    args: { reference: t.arg.string({ required: true }) },
    resolve: (_root, { reference }, ctx) => ctx.services.transactions.getByReference(ctx.principal!, reference) as never,
  }),
);
