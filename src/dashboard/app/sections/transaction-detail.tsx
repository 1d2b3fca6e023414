import { useEffect, useState } from "preact/hooks";
import { gql } from "../api.ts";
import { formatDate, formatMoney } from "../format.ts";
import { onDisputeEvent, onLiveStatus, onRefundEvent, onTransactionEvent } from "../live.ts";
import { canWrite, type Session } from "../session.ts";
import { BackLink, Badge, DetailFields, DetailMissing, ErrorNote, PageHeader, TableWrap, useQuery, type DetailField } from "../ui.tsx";
import { graphql } from "../gql/index.ts";
import type { DashboardTransactionQuery } from "../gql/graphql.ts";
import { DisputedBadge, DisputesTable } from "./disputes.tsx";
import { RefundForm, RefundedBadge, RefundsTable, refundable } from "./refunds.tsx";
import { ProviderCallsSection } from "./provider-calls.tsx";
import { methodLabel } from "./transactions.tsx";
import { DELIVERIES, DeliveriesTable, type Delivery } from "./webhooks.tsx";

const QUERY = graphql(`
  query DashboardTransaction($reference: String!) {
    transaction(reference: $reference) {
      __typename
      ...DashboardError
      ... on Transaction {
        ...DashboardTransaction databaseId description clientReference providerReference phoneNumber failureCode failureReason completedAt updatedAt
        amountRefunded refunded refunds { ...DashboardRefund }
        disputeStatus amountChargedBack disputes { ...DashboardDispute }
        events { id type occurredAt }
        attempts { method status code reason detail createdAt }
      }
    }
  }
`);

type Detail = Extract<DashboardTransactionQuery["transaction"], { __typename: "Transaction" }>;
/** One try on the hosted checkout (a card charge or an M-Pesa push), oldest first. */
type Attempt = Detail["attempts"][number];

function AttemptsTable({ attempts }: { attempts: Attempt[] }) {
  return (
    <TableWrap label="Checkout attempts">
      <thead>
        <tr>
          <th>#</th>
          <th>Method</th>
          <th>Paid with</th>
          <th>Status</th>
          <th>Outcome</th>
          <th>Started</th>
        </tr>
      </thead>
      <tbody>
        {attempts.map((attempt, i) => (
          <tr key={i}>
            <td>{i + 1}</td>
            <td>{attempt.method === "mpesa" ? "M-Pesa" : "Card"}</td>
            <td class="mono">{attempt.detail ?? "—"}</td>
            <td>
              <Badge value={attempt.status} />
            </td>
            <td>{attempt.reason || attempt.code ? `${attempt.reason ?? ""}${attempt.code ? ` (${attempt.code})` : ""}` : "—"}</td>
            <td>{formatDate(attempt.createdAt)}</td>
          </tr>
        ))}
      </tbody>
    </TableWrap>
  );
}

export function TransactionDetail({ reference, session }: { reference: string; session: Session }) {
  const { data, error, loading, reload, setData } = useQuery(QUERY, { reference });
  const [refunding, setRefunding] = useState(false);
  const [deliveries, setDeliveries] = useState<Delivery[] | null>(null);
  const [deliveriesError, setDeliveriesError] = useState<string | null>(null);
  const transaction = data?.transaction.__typename === "Transaction" ? (data.transaction as Detail) : null;
  const eventIds = transaction?.events.map((event) => event.id).join(",") ?? "";

  // Its webhook deliveries: one query per event (webhookDeliveries takes one eventId).
  const loadDeliveries = async () => {
    try {
      const ids = eventIds ? eventIds.split(",") : [];
      const lists = await Promise.all(ids.map((eventId) => gql(DELIVERIES, { eventId, limit: 50 })));
      setDeliveries(lists.flatMap((list) => list.webhookDeliveries));
      setDeliveriesError(null);
    } catch (failure) {
      setDeliveriesError(failure instanceof Error ? failure.message : String(failure));
    }
  };
  useEffect(() => void loadDeliveries(), [eventIds]);
  useEffect(() => onTransactionEvent((event) => event.transaction.reference === reference && void reload()), [reference, reload]);
  // Its refunds settle later (refund.completed or refund.failed): load it again, amounts refunded included.
  useEffect(() => onRefundEvent((event) => event.refund.transactionReference === reference && void reload()), [reference, reload]);
  // A dispute of it opened, moved or closed (its badge, its disputes, what remains refundable).
  useEffect(() => onDisputeEvent((event) => event.dispute.transactionReference === reference && void reload()), [reference, reload]);
  // After a dropped connection, events may have been missed.
  useEffect(() => onLiveStatus((_status, reconnected) => reconnected && void reload()), [reload]);

  const back = <BackLink route="/transactions" label="All transactions" />;
  if (!data) return <DetailMissing back={back} loading={loading} error={error} />;
  if (!transaction) return <DetailMissing back={back} loading={loading} error={error} notFound={{ title: "Transaction not found", message: (data.transaction as { message: string }).message }} />;
  // Owners, and developers in test mode, as the API decides (viewers never); a completed payment with something left,
  // and no dispute open (the API refuses a refund until the dispute closes).
  const remaining = refundable(transaction);
  const disputeOpen = transaction.disputeStatus === "needs_response" || transaction.disputeStatus === "under_review";
  const canRefund = canWrite(session) && transaction.status === "completed" && remaining > 0 && !disputeOpen;
  const fields: DetailField[] = [
    ["Amount", formatMoney(transaction.amount, transaction.currency)],
    [
      "Status",
      <>
        <Badge value={transaction.status} />
        {transaction.disputeStatus && <> <DisputedBadge payment={transaction} /></>}
      </>,
    ],
    ["Method", methodLabel(transaction.paymentMethod)],
    ["Channel", transaction.channel ? `${transaction.channel.name} (${transaction.channel.provider})` : "—"],
    ["Customer", transaction.customer?.email ?? transaction.email ?? "—"],
    ["Phone", transaction.phoneNumber ?? "—"],
    ["Description", transaction.description ?? "—"],
    ["Your reference", transaction.clientReference ?? "—"],
    // The provider's receipt (M-Pesa receipt, Paystack id): what a payer quotes when asking about a payment.
    ["Provider reference", transaction.providerReference ? <span class="mono">{transaction.providerReference}</span> : "—"],
    ["Created", formatDate(transaction.createdAt)],
    ["Completed", formatDate(transaction.completedAt)],
  ];
  if (transaction.amountRefunded > 0) {
    fields.splice(1, 0, [
      "Refunded",
      <>
        {formatMoney(transaction.amountRefunded, transaction.currency)} <RefundedBadge payment={transaction} />
      </>,
    ]);
  }
  if (transaction.amountChargedBack > 0) fields.splice(1, 0, ["Charged back", formatMoney(transaction.amountChargedBack, transaction.currency)]);
  if (transaction.failureReason || transaction.failureCode) fields.push(["Failure", `${transaction.failureReason ?? ""} ${transaction.failureCode ? `(${transaction.failureCode})` : ""}`]);

  return (
    <section>
      {back}
      <PageHeader title={`Transaction ${transaction.reference}`}>
        {canRefund && !refunding && (
          <button type="button" onClick={() => setRefunding(true)}>
            Refund
          </button>
        )}
      </PageHeader>
      <ErrorNote message={error} />
      {/* Kept open while refunding, even once nothing remains, so a refusal stays in view. */}
      {canWrite(session) && refunding && (
        <RefundForm
          payment={{ reference: transaction.reference, currency: transaction.currency, remaining }}
          onCancel={() => setRefunding(false)}
          onCreated={(refund) => {
            setRefunding(false);
            // Shown pending at once; its settling event (or the reload) brings the outcome.
            setData((current) => ({ transaction: { ...(current.transaction as Detail), refunds: [refund, ...(current.transaction as Detail).refunds] } }));
            void reload();
          }}
          remainingNow={async () => {
            const fresh = await gql(QUERY, { reference });
            setData(() => fresh);
            return fresh.transaction.__typename === "Transaction" ? refundable(fresh.transaction as Detail) : null;
          }}
        />
      )}
      <DetailFields id="transaction-fields" fields={fields} />
      {transaction.attempts.length > 0 && (
        <>
          <h2>Checkout attempts</h2>
          <div id="transaction-attempts">
            <AttemptsTable attempts={transaction.attempts} />
          </div>
        </>
      )}
      {transaction.refunds.length > 0 && (
        <>
          <h2>Refunds</h2>
          <RefundsTable refunds={transaction.refunds} />
        </>
      )}
      {transaction.disputes.length > 0 && (
        <>
          <h2>Disputes</h2>
          <DisputesTable disputes={transaction.disputes} bodyId="transaction-disputes" withTransaction={false} />
        </>
      )}
      <ProviderCallsSection owner="transaction" reference={transaction.reference} />
      <h2>Events</h2>
      {transaction.events.length === 0 ? (
        <p class="muted">No events yet: the payer has not finished paying.</p>
      ) : (
        <ol class="timeline" id="transaction-events">
          {transaction.events.map((event) => (
            <li key={event.id}>
              <strong>{event.type}</strong> <span class="muted">{formatDate(event.occurredAt)}</span>
              <span class="muted block">event {event.id}</span>
            </li>
          ))}
        </ol>
      )}
      <h2>Webhook deliveries</h2>
      <ErrorNote message={deliveriesError} />
      {deliveries && <DeliveriesTable deliveries={deliveries} writable={canWrite(session)} onResent={() => void loadDeliveries()} />}
    </section>
  );
}
