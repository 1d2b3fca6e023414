import type { Transaction } from "../../db/generated/prisma/client.ts";
import { defineSnapshot, OUTCOME_AND_TIMES, type Snapshot } from "../events/snapshot.ts";
import { settlingAttemptJson, type AttemptMethod } from "./attempt-store.ts";

/** The transaction as of an event: what subscribers and webhooks receive, no follow-up query needed. */
const TRANSACTION_SNAPSHOT = defineSnapshot<Transaction>()({
  id: "id",
  reference: "reference",
  amount: ["amount", "amount"],
  amount_refunded: ["amountRefunded", "amount"],
  // The provider's fee, written by the change that completes it: null before.
  fee: ["fee", "amount"],
  currency: "currency",
  status: "status",
  payment_method: "paymentMethod",
  description: "description",
  email: "email",
  phone_number: "phoneNumber",
  client_reference: "clientReference",
  checkout_request_id: "checkoutRequestId",
  channel_id: "channelId",
  customer_id: "customerId",
  metadata: "metadata",
  ...OUTCOME_AND_TIMES,
});

export const transactionSnapshot = (t: Transaction) => TRANSACTION_SNAPSHOT.of(t);
/** The same snapshot in SQL, over a transactions row named `t` (a statement that inserts and announces in one). */
export const transactionSnapshotSql = (t: string) => TRANSACTION_SNAPSHOT.sql(t);

/** The checkout attempt that settled a transaction, as its completed or failed event carries it (issue 25). */
export interface SnapshotAttempt {
  method: AttemptMethod;
  code: string | null;
  reason: string | null;
  /** 1 for the payer's first attempt on this transaction. */
  number: number;
}
export type TransactionSnapshot = ReturnType<typeof transactionSnapshot> & { attempt?: SnapshotAttempt };

/**
 * The settling event's snapshot adds the page attempt that settled it, read in the status change's own statement
 * (attempt-store.ts): the succeeded attempt of a completed transaction, the failed one whose code it failed with
 * (none for an expiry, `abandoned`). Payments with no page attempt (API pushes, C2B) have no `attempt` key.
 */
export const SETTLED_SNAPSHOT: Snapshot<Transaction, TransactionSnapshot> = {
  of: transactionSnapshot,
  sql: (t, lead) => `(${TRANSACTION_SNAPSHOT.sql(t)} || ${settlingAttemptJson(t, lead)})`,
};
