import { builder } from "../../graphql/builder.ts";
import { Payout } from "../payouts/schema.ts";
import { Refund } from "../refunds/schema.ts";
import { Transaction } from "../transactions/schema.ts";
import type { ProviderCallView } from "./store.ts";

/**
 * A provider call on record, on the transaction, refund and payout it belongs to. Owners and developers only
 * (the authorization table's `provider_calls`): a viewer selecting it gets null and a `forbidden` error, the rest
 * of the object as usual.
 */
const ProviderCall = builder.objectRef<ProviderCallView>("ProviderCall").implement({
  description: "One HTTP exchange with a provider, as the connector sent and received it, with secrets, PINs, passwords and card data removed.",
  fields: (t) => ({
    connector: t.exposeString("connector", { description: "The provider: mpesa, paystack." }),
    operation: t.exposeString("operation", { description: "What the call did, in the connector's words: stk_push, stk_query, b2c, refund, transaction_verify ..." }),
    method: t.exposeString("method"),
    path: t.exposeString("path", { description: "The URL's path, without host or query string." }),
    statusCode: t.exposeInt("statusCode", { nullable: true, description: "The HTTP status of the answer; null when none came (see error)." }),
    durationMs: t.exposeInt("durationMs"),
    requestBody: t.exposeString("requestBody", { nullable: true, description: "As sent, scrubbed; cut at 16 KiB." }),
    responseBody: t.exposeString("responseBody", { nullable: true, description: "As received, scrubbed; cut at 16 KiB." }),
    error: t.exposeString("error", { nullable: true, description: "Why no usable answer came: timeout, connection refused ..." }),
    createdAt: t.expose("createdAt", { type: "DateTime", description: "When the call was made." }),
  }),
});

const DESCRIPTION = "The calls made to its provider, oldest first (the latest 200), kept 30 days. Owners and developers only: null with a forbidden error for a viewer.";

builder.objectField(Transaction, "providerCalls", (t) =>
  t.field({ type: [ProviderCall], nullable: true, description: `${DESCRIPTION} Its checkout attempts' calls included.`, resolve: (transaction, _args, ctx) => ctx.services.providerCalls.ofTransaction(ctx.principal!.merchantId, transaction.id) }),
);

builder.objectField(Refund, "providerCalls", (t) =>
  t.field({ type: [ProviderCall], nullable: true, description: DESCRIPTION, resolve: (refund, _args, ctx) => ctx.services.providerCalls.ofRefund(ctx.principal!.merchantId, refund.id) }),
);

builder.objectField(Payout, "providerCalls", (t) =>
  t.field({ type: [ProviderCall], nullable: true, description: DESCRIPTION, resolve: (payout, _args, ctx) => ctx.services.providerCalls.ofPayout(ctx.principal!.merchantId, payout.id) }),
);
