import { lexicographicSortSchema, printSchema, type GraphQLSchema } from "graphql";
import { builder } from "../graphql/builder.ts";
import "../graphql/errors.ts";
// Each feature registers its types and root fields with the builder: the schema is the sum of the modules, so it is assembled here, above them.
import "../modules/merchants/schema.ts";
import "../modules/channels/schema.ts";
import "../modules/customers/schema.ts";
import "../modules/payment-methods/schema.ts";
import "../modules/transactions/schema.ts";
import "../modules/momo/schema.ts";
import "../modules/events/schema.ts";
import "../modules/webhooks/schema.ts";
import "../modules/payouts/schema.ts";
import "../modules/refunds/schema.ts";
import "../modules/disputes/schema.ts";
import "../modules/billing/schema.ts";
import "../modules/payment-links/schema.ts";
import "../modules/brand/schema.ts";
import "../modules/reports/schema.ts";
import "../modules/reconciliation/schema.ts";
import "../modules/users/schema.ts";
import "../modules/ledger/schema.ts";
import "../modules/provider-calls/schema.ts";
import "../modules/mail/schema.ts";
import "../modules/go-live/schema.ts";

export const schema: GraphQLSchema = lexicographicSortSchema(builder.toSchema());

/** The SDL checked in as schema.graphql; a test fails when the file is stale. */
export function printSortedSchema(): string {
  return `${printSchema(schema)}\n`;
}
