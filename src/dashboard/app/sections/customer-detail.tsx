import { mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardCustomerInvoiceFragment, DashboardPaymentMethodFragment, InvoiceStatus } from "../gql/graphql.ts";
import { formatDate, formatMoney, titleCase } from "../format.ts";
import { BASE, onLinkClick } from "../router.ts";
import { canWrite, type Session } from "../session.ts";
import { Table } from "../tables.tsx";
import { BackLink, Badge, ConfirmButton, DetailFields, DetailMissing, ErrorNote, PageHeader, announce, useAction, useQuery, type DetailField } from "../ui.tsx";
import { SubscriptionsTable } from "./subscriptions.tsx";

/**
 * A customer's page (/customers/:databaseId): who it is, its saved payment methods (detached ones are gone from
 * the list; a writer detaches one for good), its subscriptions (cancel) and its invoices, each charge an ordinary
 * transaction linked to its page. The provider's token of a method never reaches the dashboard.
 */
graphql(`
  fragment DashboardPaymentMethod on PaymentMethod { id type reusable createdAt card { brand last4 expMonth expYear bank } mpesa { phone } }
`);
type PaymentMethod = DashboardPaymentMethodFragment;
graphql(`
  fragment DashboardCustomerInvoice on Invoice {
    id status amountDue currency periodStart periodEnd attempts nextAttemptAt paidAt transactionReference subscription { id plan { name } }
  }
`);
type Invoice = DashboardCustomerInvoiceFragment;

const DETAIL = graphql(`
  query DashboardCustomerDetail($id: Int!) {
    customer(id: $id) {
      __typename
      ...DashboardError
      ... on Customer {
        databaseId email firstName lastName phone createdAt testClock { id frozenTime }
        paymentMethods { ...DashboardPaymentMethod }
        subscriptions { ...DashboardSubscription }
        invoices { ...DashboardCustomerInvoice }
      }
    }
  }
`);
const DETACH = graphql(`
  mutation DashboardDetachPaymentMethod($id: String!) { detachPaymentMethod(id: $id) { __typename ...DashboardError ... on PaymentMethod { id } } }
`);

/** Paid, still being collected, given up on; void (canceled before it was paid) is plain grey. */
const INVOICE_KINDS: Record<InvoiceStatus, string> = { paid: "completed", open: "pending", uncollectible: "failed", void: "void" };

/** A method as the payer knows it: "Visa •••• 4242", "M-Pesa 2547*****149". */
function methodName(method: PaymentMethod): string {
  if (method.card) return `${method.card.brand ? titleCase(method.card.brand) : "Card"} •••• ${method.card.last4 ?? "????"}`;
  if (method.mpesa) return `M-Pesa ${method.mpesa.phone}`;
  return titleCase(method.type);
}

const expiry = (card: PaymentMethod["card"]) => (card?.expMonth && card.expYear ? `${String(card.expMonth).padStart(2, "0")}/${card.expYear}` : "—");

export function CustomerDetail({ id, session }: { id: number; session: Session }) {
  const { data, error, loading, reload } = useQuery(DETAIL, { id });
  const detaching = useAction();
  const back = <BackLink route="/customers" label="All customers" />;
  if (!data) return <DetailMissing back={back} loading={loading} error={error} />;
  if (data.customer.__typename !== "Customer") return <DetailMissing back={back} loading={loading} error={error} notFound={{ title: "Customer not found", message: (data.customer as { message: string }).message }} />;
  const customer = data.customer;
  const writable = canWrite(session);
  const name = [customer.firstName, customer.lastName].filter(Boolean).join(" ");

  const detach = (method: PaymentMethod) =>
    void detaching.run(async () => {
      await mutate(DETACH, "detachPaymentMethod", { id: method.id });
      announce(`${methodName(method)} detached: it can no longer be charged`);
      await reload();
    });

  const fields = ([
    ["E-mail", customer.email],
    ["Name", name || "—"],
    ["Phone", customer.phone ?? "—"],
    ["Created", formatDate(customer.createdAt)],
    ["Customer id", <span class="mono">{customer.databaseId}</span>],
    customer.testClock ? ["Test clock", <><span class="mono">{customer.testClock.id}</span><span class="muted block">Its time: {formatDate(customer.testClock.frozenTime)}</span></>] : null,
  ] satisfies (DetailField | null)[]).filter((field) => field !== null);

  return (
    <section>
      {back}
      <PageHeader title={name || customer.email} />
      <ErrorNote message={error} />
      <DetailFields id="customer-fields" fields={fields} />

      <h2>Payment methods</h2>
      <ErrorNote message={detaching.error} />
      {customer.paymentMethods.length === 0 ? (
        <p class="muted">No saved payment methods. A payer saves one at checkout, with the payer's consent.</p>
      ) : (
        <Table
          label="Payment methods"
          bodyId="customer-methods"
          rows={customer.paymentMethods}
          rowKey="id"
          rowProps={(method) => ({ "data-id": method.id })}
          columns={[
            { label: "Method", cell: methodName, note: (method) => <span class="mono">{method.id}</span> },
            { label: "Expires", cell: (method) => expiry(method.card) },
            { label: "Bank", cell: (method) => method.card?.bank ?? "—" },
            { label: "Saved", cell: (method) => formatDate(method.createdAt) },
          ]}
          actions={
            writable
              ? (method) => (
                  <ConfirmButton
                    label="Detach"
                    question={`Detach ${methodName(method)}? It can never be charged again.`}
                    confirmLabel="Yes, detach"
                    disabled={detaching.busy}
                    onConfirm={() => detach(method)}
                  />
                )
              : undefined
          }
        />
      )}

      <h2>Subscriptions</h2>
      {customer.subscriptions.length === 0 ? (
        <p class="muted">No subscriptions.</p>
      ) : (
        <SubscriptionsTable subscriptions={customer.subscriptions} session={session} withCustomer={false} onChanged={() => void reload()} />
      )}

      <h2>Invoices</h2>
      {customer.invoices.length === 0 ? <p class="muted">No invoices.</p> : <InvoicesTable invoices={customer.invoices} />}
    </section>
  );
}

/** One invoice a period, newest first: what was due, how collecting it went, and its latest charge's transaction. */
function InvoicesTable({ invoices }: { invoices: Invoice[] }) {
  return (
    <Table
      label="Invoices"
      bodyId="customer-invoices"
      rows={invoices}
      rowKey="id"
      rowProps={(invoice) => ({ "data-id": invoice.id, "data-status": invoice.status })}
      columns={[
        { label: "Period", cell: (invoice) => `${formatDate(invoice.periodStart)} – ${formatDate(invoice.periodEnd)}`, note: (invoice) => <span class="mono">{invoice.id}</span> },
        { label: "Amount", num: true, cell: (invoice) => formatMoney(invoice.amountDue, invoice.currency), note: (invoice) => invoice.subscription.plan.name },
        { label: "Status", cell: (invoice) => <Badge value={invoice.status} kind={INVOICE_KINDS[invoice.status]} />, note: (invoice) => invoice.paidAt && `Paid ${formatDate(invoice.paidAt)}` },
        { label: "Attempts", num: true, cell: (invoice) => String(invoice.attempts) },
        { label: "Next attempt", cell: (invoice) => formatDate(invoice.nextAttemptAt) },
        {
          label: "Transaction",
          cell: (invoice) =>
            invoice.transactionReference ? (
              <a href={`${BASE}/transactions/${invoice.transactionReference}`} onClick={(e) => onLinkClick(e, `/transactions/${invoice.transactionReference}`)} class="mono">
                {invoice.transactionReference}
              </a>
            ) : (
              "—"
            ),
        },
      ]}
    />
  );
}
