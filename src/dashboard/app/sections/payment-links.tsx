import { useState } from "preact/hooks";
import { ApiError, mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardPaymentLinkFragment } from "../gql/graphql.ts";
import { formatDate, formatMoney, parseMajorUnits } from "../format.ts";
import { CardForm, useFocusOnMount } from "../forms.tsx";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, ConfirmButton, EmptyState, PageHeader, announce, useAction, useQuery } from "../ui.tsx";

graphql(`
  fragment DashboardPaymentLink on PaymentLink { databaseId url slug active amount minAmount currency description reusable expiresAt paymentsCount createdAt }
`);
type PaymentLink = DashboardPaymentLinkFragment;
const LINKS = graphql(`
  query DashboardPaymentLinks($limit: Int) {
    paymentLinksPage(limit: $limit) { __typename ...DashboardError ... on PaymentLinkPage { total items { ...DashboardPaymentLink } } }
  }
`);
const CREATE = graphql(`
  mutation DashboardCreatePaymentLink($input: CreatePaymentLinkInput!) {
    createPaymentLink(input: $input) { __typename ...DashboardError ... on PaymentLink { ...DashboardPaymentLink } }
  }
`);
const DEACTIVATE = graphql(`
  mutation DashboardDeactivatePaymentLink($id: String!) {
    deactivatePaymentLink(id: $id) { __typename ...DashboardError ... on PaymentLink { ...DashboardPaymentLink } }
  }
`);

const amountText = (link: PaymentLink) => (link.amount === null ? `Any amount from ${formatMoney(link.minAmount, link.currency)}` : formatMoney(link.amount, link.currency));
const stateOf = (link: PaymentLink) =>
  !link.active ? "inactive" : link.expiresAt && new Date(link.expiresAt).getTime() <= Date.now() ? "expired" : !link.reusable && link.paymentsCount > 0 ? "used" : "active";

/** Payment links: "Request a payment" makes one and shows it to copy; the list shows each link's state, with Deactivate for writers. */
export function PaymentLinks({ session }: { session: Session }) {
  const writable = canWrite(session);
  const links = useQuery(LINKS, { limit: 100 });
  const [requesting, setRequesting] = useState(false);
  const [created, setCreated] = useState<PaymentLink | null>(null);
  const deactivate = useAction();

  const turnOff = (link: PaymentLink) =>
    deactivate.run(async () => {
      await mutate(DEACTIVATE, "deactivatePaymentLink", { id: String(link.databaseId) });
      announce(`Payment link "${link.description}" deactivated`);
      await links.reload();
    });

  return (
    <section>
      <PageHeader title="Payment links">
        {writable && !requesting && (
          <button type="button" id="request-payment" onClick={() => setRequesting(true)}>
            Request a payment
          </button>
        )}
      </PageHeader>
      {created && <NewLink link={created} onDone={() => setCreated(null)} />}
      {writable && requesting && (
        <RequestForm
          onCancel={() => setRequesting(false)}
          onCreated={(link) => {
            setRequesting(false);
            setCreated(link);
            void links.reload();
          }}
        />
      )}
      <Listing
        items={links.data?.paymentLinksPage.__typename === "PaymentLinkPage" ? links.data.paymentLinksPage.items : undefined}
        loading={links.loading}
        error={links.error ?? deactivate.error}
        empty={<EmptyState title="No payment links">{writable && <p>Request a payment to get a link you can send to a payer by SMS, e-mail or chat.</p>}</EmptyState>}
      >
        {(list) => (
          <Table
            label="Payment links"
            bodyId="payment-links"
            rows={list}
            rowKey="databaseId"
            rowProps={(link) => ({ "data-slug": link.slug, "data-state": stateOf(link) })}
            columns={[
              { label: "Description", class: "break", cell: (link) => link.description, note: (link) => link.url },
              { label: "Amount", cell: amountText },
              { label: "State", cell: (link) => <Badge value={stateOf(link)} kind={stateOf(link) === "active" ? "completed" : "failed"} />, note: (link) => (link.reusable ? "Reusable" : "Single use") },
              { label: "Payments", num: true, cell: (link) => String(link.paymentsCount) },
              { label: "Created", cell: (link) => formatDate(link.createdAt) },
            ]}
            actions={
              writable
                ? (link) =>
                    link.active ? (
                      <ConfirmButton label="Deactivate" question={`Stop "${link.description}" taking payments?`} confirmLabel="Deactivate link" disabled={deactivate.busy} onConfirm={() => void turnOff(link)} />
                    ) : null
                : undefined
            }
          />
        )}
      </Listing>
    </section>
  );
}

/** The link just made, to copy and send (the clipboard, or the text selected where the clipboard is refused). */
function NewLink({ link, onDone }: { link: PaymentLink; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(link.url);
      setCopied(true);
      announce("Link copied");
    } catch {
      const node = document.getElementById("payment-link-url");
      if (node) {
        const range = document.createRange();
        range.selectNodeContents(node);
        getSelection()?.removeAllRanges();
        getSelection()?.addRange(range);
      }
    }
  };
  return (
    <div class="secret" role="status" id="new-payment-link">
      <h2>Your payment link</h2>
      <p>
        {link.description}: {amountText(link)}
      </p>
      <code id="payment-link-url" class="secret-value">
        {link.url}
      </code>
      <div class="row">
        <button type="button" id="copy-payment-link" onClick={copy}>
          {copied ? "Copied" : "Copy link"}
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          Done
        </button>
      </div>
    </div>
  );
}

function RequestForm({ onCreated, onCancel }: { onCreated: (link: PaymentLink) => void; onCancel: () => void }) {
  const [open, setOpen] = useState(false);
  const [amount, setAmount] = useState("");
  const [currency, setCurrency] = useState("KES");
  const [description, setDescription] = useState("");
  const [reusable, setReusable] = useState(false);
  const amountRef = useFocusOnMount<HTMLInputElement>();
  const submit = async () => {
    const code = currency.trim().toUpperCase() || "KES";
    const minor = amount.trim() === "" && open ? null : parseMajorUnits(amount, code);
    if (minor === null && !(open && amount.trim() === "")) throw new ApiError(`Amount: enter it in ${code}, e.g. 250.00`, "validation_failed");
    const input = {
      currency: code,
      description: description.trim(),
      reusable,
      ...(open ? (minor !== null ? { minAmount: minor } : {}) : { amount: minor }),
    };
    const link = await mutate(CREATE, "createPaymentLink", { input });
    announce("Payment link created. Copy it to send to your payer.");
    onCreated(link);
  };
  return (
    <CardForm title="Request a payment" titleId="request-title" id="request-form" submit="Create link" onSubmit={submit} onCancel={onCancel}>
      <div class="grid">
        <div class="field">
          <label for="link-description">What is it for?</label>
          <input id="link-description" type="text" required maxLength={500} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="link-amount">{open ? "Least amount (optional)" : "Amount"}</label>
          <input id="link-amount" ref={amountRef} type="text" inputMode="decimal" autoComplete="off" required={!open} value={amount} onInput={(e) => setAmount(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="link-currency">Currency</label>
          <input id="link-currency" type="text" maxLength={3} value={currency} onInput={(e) => setCurrency(e.currentTarget.value)} />
        </div>
      </div>
      <div class="field checkbox">
        <label>
          <input id="link-open" type="checkbox" checked={open} onChange={(e) => setOpen(e.currentTarget.checked)} /> The payer chooses the amount
        </label>
      </div>
      <div class="field checkbox">
        <label>
          <input id="link-reusable" type="checkbox" checked={reusable} onChange={(e) => setReusable(e.currentTarget.checked)} /> Reusable: anyone with the link can pay, more than once
        </label>
      </div>
    </CardForm>
  );
}
