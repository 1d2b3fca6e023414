import { channelRoutes } from "../modules/channels/routes.ts";
import { customerRoutes } from "../modules/customers/routes.ts";
import { momoRoutes } from "../modules/momo/routes.ts";
import { merchantRoutes } from "../modules/merchants/routes.ts";
import { transactionRoutes } from "../modules/transactions/routes.ts";
import { webhookRoutes } from "../modules/webhooks/routes.ts";
import { payoutRoutes } from "../modules/payouts/routes.ts";
import { refundRoutes } from "../modules/refunds/routes.ts";
import { disputeRoutes } from "../modules/disputes/routes.ts";
import { billingRoutes } from "../modules/billing/routes.ts";
import { paymentLinkRoutes } from "../modules/payment-links/routes.ts";
import { paymentMethodRoutes } from "../modules/payment-methods/routes.ts";
import { ledgerRoutes } from "../modules/ledger/routes.ts";
import { reconciliationRoutes } from "../modules/reconciliation/routes.ts";
import { providerCallRoutes } from "../modules/provider-calls/routes.ts";
import { mailRoutes } from "../modules/mail/routes.ts";
import { goLiveRoutes } from "../modules/go-live/routes.ts";
import type { RestRoute } from "../rest/route-table.ts";

/** Every REST row, from every feature: the route table (src/rest/route-table.ts) serves them, the composition root lists them. */
export const restRoutes: RestRoute[] = [
  ...merchantRoutes, ...transactionRoutes, ...momoRoutes, ...channelRoutes, ...customerRoutes, ...paymentMethodRoutes, ...webhookRoutes, ...payoutRoutes, ...refundRoutes,
  ...disputeRoutes, ...billingRoutes, ...ledgerRoutes, ...reconciliationRoutes, ...paymentLinkRoutes, ...providerCallRoutes, ...mailRoutes, ...goLiveRoutes,
];
