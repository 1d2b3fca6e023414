import { useEffect, useRef, useState } from "preact/hooks";
import { gql, mutate } from "../api.ts";
import { formatDate, formatMoney } from "../format.ts";
import { onDisputeEvent, onLiveStatus, onRefundEvent, onTransactionEvent } from "../live.ts";
import { canWrite, type Session } from "../session.ts";
import { Table } from "../tables.tsx";
import { BackLink, Badge, DetailFields, DetailMissing, ErrorNote, PageHeader, announce, useAction, useQuery, type DetailField } from "../ui.tsx";
import { graphql } from "../gql/index.ts";
import type { DashboardTransactionQuery } from "../gql/graphql.ts";
import { DisputedBadge, DisputesTable } from "./disputes.tsx";
import { feeNetFields } from "./fee-net.tsx";
import { MailTable } from "./inbox.tsx";
import { RefundForm, RefundedBadge, RefundsTable, refundable } from "./refunds.tsx";
import { ProviderCallsSection } from "./provider-calls.tsx";
import { paidWith, payerOf } from "./transactions.tsx";
import { DELIVERIES, DeliveriesTable, type Delivery } from "./webhooks.tsx";

const QUERY = graphql(`
  query DashboardTransaction($reference: String!) {
    transaction(reference: $reference) {
      __typename
      ...DashboardError
      ... on Transaction {
        ...DashboardTransaction ...DashboardFeeNet databaseId description clientReference providerReference phoneNumber failureCode failureReason completedAt updatedAt
        metadata paymentDetail { ...DashboardPaymentDetail }
        amountRefunded refunded refunds { ...DashboardRefund }
        disputeStatus amountChargedBack disputes { ...DashboardDispute }
        history { id type occurredAt subjectReference webhookBody }
        attempts { method status code reason detail createdAt settledAt }
      }
    }
  }
`);

const MAILS = graphql(`
  query DashboardTransactionMails($reference: String!) { transaction(reference: $reference) { __typename ... on Transaction { mailMessages { ...DashboardMailMessage } } } }
`);
const RESEND_RECEIPT = graphql(`
  mutation DashboardResendReceipt($reference: String!) { resendReceipt(reference: $reference) { __typename ...DashboardError ... on MailMessage { ...DashboardMailMessage } } }
`);
/** How often, and how many times, a payment's e-mails are looked at again while one is still queued (its job sends it within seconds). */
const QUEUED_RECHECK_MS = 1500;
const QUEUED_RECHECKS = 20;

type Detail = Extract<DashboardTransactionQuery["transaction"], { __typename: "Transaction" }>;
/** One try on the hosted checkout (a card charge or an M-Pesa push), oldest first. */
type Attempt = Detail["attempts"][number];

/** Every attempt, oldest first: on phones each row stacks with its labels (the shared Table). */
function AttemptsTable({ attempts }: { attempts: Attempt[] }) {
  const rows = attempts.map((attempt, i) => ({ ...attempt, n: i + 1 }));
  return (
    <Table
      label="Checkout attempts"
      rows={rows}
      rowKey="n"
      columns={[
        { label: "#", cell: (attempt) => attempt.n },
        { label: "Method", cell: (attempt) => (attempt.method === "mpesa" ? "M-Pesa" : "Card") },
        { label: "Paid with", cell: (attempt) => (attempt.detail ? <span class="mono">{attempt.detail}</span> : "—") },
        { label: "Status", cell: (attempt) => <Badge value={attempt.status} /> },
        { label: "Outcome", cell: (attempt) => (attempt.reason || attempt.code ? `${attempt.reason ?? ""}${attempt.code ? ` (${attempt.code})` : ""}` : "—") },
        { label: "Started", cell: (attempt) => formatDate(attempt.createdAt) },
        { label: "Settled", cell: (attempt) => (attempt.settledAt ? formatDate(attempt.settledAt) : "—") },
      ]}
    />
  );
}

/**
 * A payment's e-mails (its receipts, newest first), each with its outcome: sent, kept in the test inbox, or skipped or
 * failed with the reason. An owner sends a completed payment's receipt again (the gateway allows 3 an hour).
 */
function MailsSection({ payment, session }: { payment: { reference: string; status: string; email?: string | null }; session: Session }) {
  const { data, error, loading, reload } = useQuery(MAILS, { reference: payment.reference });
  const resend = useAction();
  const [resent, setResent] = useState(false);
  const rechecks = useRef(0);
  const messages = data?.transaction.__typename === "Transaction" ? data.transaction.mailMessages : null;
  const queued = messages?.some((message) => message.status === "queued") ?? false;

  // Its completion writes the receipt; a reconnection may have missed that.
  useEffect(() => onTransactionEvent((event) => event.transaction.reference === payment.reference && void reload()), [payment.reference, reload]);
  useEffect(() => onLiveStatus((_status, reconnected) => reconnected && void reload()), [reload]);
  // A queued message is sent (or kept, or skipped) by its job a moment later, and no event says so: look again for a while.
  useEffect(() => {
    if (!queued) {
      rechecks.current = 0;
      return;
    }
    if (rechecks.current >= QUEUED_RECHECKS) return;
    const timer = setTimeout(() => {
      rechecks.current++;
      void reload();
    }, QUEUED_RECHECK_MS);
    return () => clearTimeout(timer);
  }, [queued, messages]);

  const canResend = session.user.role === "owner" && payment.status === "completed";
  const resendReceipt = () =>
    resend.run(async () => {
      setResent(false);
      await mutate(RESEND_RECEIPT, "resendReceipt", { reference: payment.reference });
      setResent(true);
      announce(`Receipt queued for ${payment.email ?? "the payer"}`);
      rechecks.current = 0;
      await reload();
    });

  return (
    <>
      <div class="subheader">
        <h2 id="transaction-mails-title">E-mails</h2>
        {canResend && (
          <button type="button" class="secondary small" id="resend-receipt" disabled={resend.busy} onClick={() => void resendReceipt()}>
            {resend.busy ? "Sending…" : "Resend receipt"}
          </button>
        )}
      </div>
      <ErrorNote message={resend.error} />
      {resent && !resend.error && (
        <p class="ok" role="status" id="resend-receipt-status">
          Receipt queued{payment.email ? ` for ${payment.email}` : ""}: it is listed below.
        </p>
      )}
      <div id="transaction-mails-list">
        <ErrorNote message={error} />
        {!messages && loading && <p class="muted">Loading…</p>}
        {messages && messages.length === 0 && (
          <p class="muted">
            {!payment.email
              ? "No e-mails: the payer gave no e-mail address."
              : payment.status === "completed"
                ? "No e-mails about this payment: receipts to payers may be turned off (see Brand)."
                : "No e-mails about this payment yet: its receipt is written when it completes."}
          </p>
        )}
        {messages && messages.length > 0 && <MailTable messages={messages} linked={session.mode === "test"} />}
      </div>
    </>
  );
}

export function TransactionDetail({ reference, session }: { reference: string; session: Session }) {
  const { data, error, loading, reload, setData } = useQuery(QUERY, { reference });
  const [refunding, setRefunding] = useState(false);
  const [deliveries, setDeliveries] = useState<Delivery[] | null>(null);
  const [deliveriesError, setDeliveriesError] = useState<string | null>(null);
  const transaction = data?.transaction.__typename === "Transaction" ? (data.transaction as Detail) : null;
  // Its own events and its refunds' and disputes': each one's deliveries are this payment's webhooks.
  const eventIds = transaction?.history.map((event) => event.id).join(",") ?? "";

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
    ["Method", paidWith(transaction)],
    ["Channel", transaction.channel ? `${transaction.channel.name} (${transaction.channel.provider})` : "—"],
    ["Payer", payerOf(transaction)],
    ["Customer", transaction.customer?.email ?? transaction.email ?? "—"],
    ["Phone", transaction.phoneNumber ?? "—"],
    ["Description", transaction.description ?? "—"],
    ["Your reference", transaction.clientReference ?? "—"],
    // The provider's receipt (M-Pesa receipt, Paystack id): what a payer quotes when asking about a payment.
    ["Provider reference", transaction.providerReference ? <span class="mono">{transaction.providerReference}</span> : "—"],
    ["Created", formatDate(transaction.createdAt)],
    ["Completed", formatDate(transaction.completedAt)],
  ];
  fields.splice(1, 0, ...feeNetFields(transaction));
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
      <h2>Metadata</h2>
      {transaction.metadata == null ? (
        <p class="muted" id="transaction-metadata">
          No metadata: none was sent with the payment.
        </p>
      ) : (
        <pre class="code" id="transaction-metadata" tabIndex={0} aria-label="Metadata">
          {JSON.stringify(transaction.metadata, null, 2)}
        </pre>
      )}
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
      <MailsSection payment={transaction} session={session} />
      <ProviderCallsSection owner="transaction" reference={transaction.reference} />
      <h2>Events</h2>
      {transaction.history.length === 0 ? (
        <p class="muted">No events yet: the payer has not finished paying.</p>
      ) : (
        <ol class="timeline" id="transaction-events">
          {transaction.history.map((event) => (
            <li key={event.id}>
              <strong>{event.type}</strong> <span class="muted">{formatDate(event.occurredAt)}</span>
              <span class="muted block">
                event {event.id}
                {event.subjectReference ? ` · ${event.subjectReference}` : ""}
              </span>
              {/* What each webhook endpoint is sent for it: the payload only, never the endpoint's secret or signature. */}
              <details class="webhook-body">
                <summary>Webhook request body</summary>
                <pre class="code" tabIndex={0}>
                  {JSON.stringify(event.webhookBody, null, 2)}
                </pre>
              </details>
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
