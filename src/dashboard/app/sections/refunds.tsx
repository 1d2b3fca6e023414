import { useState } from "preact/hooks";
import { ApiError, mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardRefundFragment, RefundReason } from "../gql/graphql.ts";
import { formatDate, formatMoney, majorUnits, parseMajorUnits, titleCase } from "../format.ts";
import { CardForm, useFocusOnMount } from "../forms.tsx";
import { Table } from "../tables.tsx";
import { providerCallsColumn } from "./provider-calls.tsx";
import { Badge, announce } from "../ui.tsx";

/** A transaction's refunds, as its page selects them (Transaction.refunds, newest first). */
graphql(`
  fragment DashboardRefund on Refund {
    databaseId reference amount currency status reason merchantNote customerNote failureCode failureReason createdAt completedAt
  }
`);
export type Refund = DashboardRefundFragment;

const CREATE = graphql(`
  mutation DashboardCreateRefund($input: CreateRefundInput!) { createRefund(input: $input) { __typename ...DashboardError ... on Refund { ...DashboardRefund } } }
`);

/** The API's four reasons, in the order a merchant most often needs them. */
const REASONS = ["requested_by_customer", "duplicate", "fraudulent", "other"] as const;

/** What can still be refunded, as the gateway counts it: the amount paid less every refund that has not failed and what lost disputes took. */
export function refundable(payment: { amount: number; amountChargedBack: number; refunds: Refund[] }): number {
  return payment.amount - payment.amountChargedBack - payment.refunds.filter((refund) => refund.status !== "failed").reduce((sum, refund) => sum + refund.amount, 0);
}

/** The "Partially refunded" / "Refunded" badge of a completed transaction (nothing when none of it is refunded). */
export function RefundedBadge({ payment }: { payment: { amountRefunded?: number; refunded?: boolean } }) {
  if (payment.refunded) return <Badge value="refunded" kind="refunded" />;
  return payment.amountRefunded ? <Badge value="partially_refunded" kind="refunded" /> : null;
}

/**
 * The Refund form of a transaction's page: the amount in major units (prefilled with all that remains), a reason
 * and two notes. `onRefused` reloads the transaction, so a refusal for the amount can say what remains now.
 */
export function RefundForm({
  payment,
  onCreated,
  onCancel,
  remainingNow,
}: {
  payment: { reference: string; currency: string; remaining: number };
  onCreated: (refund: Refund) => void;
  onCancel: () => void;
  /** What remains refundable after a reload (another refund may have been made meanwhile). */
  remainingNow: () => Promise<number | null>;
}) {
  const [amount, setAmount] = useState(majorUnits(payment.remaining, payment.currency));
  const [reason, setReason] = useState<RefundReason | "">("");
  const [merchantNote, setMerchantNote] = useState("");
  const [customerNote, setCustomerNote] = useState("");
  const amountRef = useFocusOnMount<HTMLInputElement>();
  const submit = async () => {
    const minor = parseMajorUnits(amount, payment.currency);
    if (minor === null) throw new ApiError(`Amount: enter it in ${payment.currency}, e.g. ${majorUnits(payment.remaining, payment.currency)}`, "validation_failed");
    const input = {
      transaction: payment.reference,
      amount: minor,
      ...(reason ? { reason } : {}),
      ...(merchantNote.trim() ? { merchantNote: merchantNote.trim() } : {}),
      ...(customerNote.trim() ? { customerNote: customerNote.trim() } : {}),
    };
    let refund: Refund;
    try {
      refund = await mutate(CREATE, "createRefund", { input });
    } catch (error) {
      // The API says what remains in minor units; say it as this page shows amounts, counted afresh.
      if (error instanceof ApiError && error.code === "amount_exceeds_refundable") {
        const remaining = await remainingNow().catch(() => null);
        if (remaining !== null) {
          throw new ApiError(
            remaining > 0
              ? `At most ${formatMoney(remaining, payment.currency)} can still be refunded on this transaction (refunds still pending count too).`
              : "Nothing remains to be refunded on this transaction (refunds still pending count too).",
            error.code,
          );
        }
      }
      throw error;
    }
    announce(`Refund of ${formatMoney(refund.amount, refund.currency)} started: pending`);
    onCreated(refund);
  };
  return (
    <CardForm title="Refund this payment" titleId="refund-title" id="refund-form" submit="Refund" onSubmit={submit} onCancel={onCancel}>
      <p class="muted hint">
        {formatMoney(payment.remaining, payment.currency)} can be refunded. The payer gets it back the way they paid.
      </p>
      <div class="grid">
        <div class="field">
          <label for="refund-amount">Amount ({payment.currency})</label>
          <input id="refund-amount" ref={amountRef} type="text" inputMode="decimal" autoComplete="off" required value={amount} onInput={(e) => setAmount(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="refund-reason">Reason (optional)</label>
          <select id="refund-reason" value={reason} onChange={(e) => setReason(e.currentTarget.value as RefundReason | "")}>
            <option value="">Not given</option>
            {REASONS.map((value) => (
              <option value={value} key={value}>
                {titleCase(value)}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="refund-merchant-note">Internal note (optional)</label>
          <input id="refund-merchant-note" type="text" maxLength={255} value={merchantNote} onInput={(e) => setMerchantNote(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="refund-customer-note">Note to customer (optional)</label>
          <input id="refund-customer-note" type="text" maxLength={255} value={customerNote} onInput={(e) => setCustomerNote(e.currentTarget.value)} />
        </div>
      </div>
    </CardForm>
  );
}

/** A transaction's refunds with their status (kept live by the page). */
export function RefundsTable({ refunds }: { refunds: Refund[] }) {
  return (
    <Table
      label="Refunds"
      bodyId="transaction-refunds"
      rows={refunds}
      rowKey="reference"
      rowProps={(refund) => ({ "data-reference": refund.reference, "data-status": refund.status })}
      columns={[
        { label: "Reference", class: "mono", cell: (refund) => refund.reference },
        { label: "Status", cell: (refund) => <Badge value={refund.status} />, note: (refund) => refund.failureReason && `${refund.failureReason}${refund.failureCode ? ` (${refund.failureCode})` : ""}` },
        { label: "Amount", num: true, cell: (refund) => formatMoney(refund.amount, refund.currency) },
        {
          label: "Reason",
          cell: (refund) => (refund.reason ? titleCase(refund.reason) : "—"),
          note: (refund) => [refund.merchantNote, refund.customerNote && `To the customer: ${refund.customerNote}`].filter(Boolean).join(" · ") || null,
        },
        { label: "Created", cell: (refund) => formatDate(refund.createdAt) },
        { label: "Completed", cell: (refund) => formatDate(refund.completedAt) },
        ...providerCallsColumn<Refund>("refund"),
      ]}
    />
  );
}
