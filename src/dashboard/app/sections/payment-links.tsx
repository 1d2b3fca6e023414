import QRCode from "qrcode";
import { useEffect, useState } from "preact/hooks";
import { ApiError, mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardPaymentLinkFragment } from "../gql/graphql.ts";
import { formatDate, formatMoney, parseMajorUnits, titleCase } from "../format.ts";
import { BASE, onLinkClick } from "../router.ts";
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
const PAYMENTS = graphql(`
  query DashboardPaymentLinkPayments($id: String!) {
    paymentLink(id: $id) {
      __typename ...DashboardError
      ... on PaymentLink { databaseId payments(limit: 50) { reference status amount currency paymentMethod email phoneNumber createdAt } }
    }
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
  const [shown, setShown] = useState<number | null>(null);
  const list = links.data?.paymentLinksPage.__typename === "PaymentLinkPage" ? links.data.paymentLinksPage.items : undefined;
  const shownLink = list?.find((link) => link.databaseId === shown);

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
        items={list}
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
            actions={(link) => (
              <div class="row">
                <CopyButton url={link.url} id={`copy-${link.slug}`} subject={link.description} />
                <button type="button" class="secondary small" aria-expanded={shown === link.databaseId} aria-controls="payment-link-detail" onClick={() => setShown(shown === link.databaseId ? null : link.databaseId)}>
                  {shown === link.databaseId ? "Hide" : "QR and payments"}
                </button>
                {writable && stateOf(link) === "active" && (
                  <ConfirmButton label="Deactivate" question={`Stop "${link.description}" taking payments?`} confirmLabel="Deactivate link" disabled={deactivate.busy} onConfirm={() => void turnOff(link)} />
                )}
              </div>
            )}
          />
        )}
      </Listing>
      {shownLink && <LinkDetail key={shownLink.databaseId} link={shownLink} onClose={() => setShown(null)} />}
    </section>
  );
}

/**
 * Copies a link (the clipboard; where it is refused, a prompt holding the URL selected, to copy by hand). Its name
 * starts with what it shows ("Copy", then "Copied"), as speech input and axe's label-content-name-mismatch expect.
 */
function CopyButton({ url, id, subject }: { url: string; id: string; subject: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(url);
    } catch {
      // No clipboard (an http page, a refused permission): the old way, through a selected text field.
      const field = document.createElement("textarea");
      field.value = url;
      field.setAttribute("readonly", "");
      field.style.position = "fixed";
      field.style.opacity = "0";
      document.body.appendChild(field);
      field.select();
      const done = document.execCommand("copy");
      field.remove();
      if (!done) {
        window.prompt("Copy the link:", url);
        return;
      }
    }
    setCopied(true);
    announce("Link copied");
    setTimeout(() => setCopied(false), 2000);
  };
  return (
    <button type="button" class="secondary small" id={id} aria-label={`${copied ? "Copied" : "Copy"} link: ${subject}`} onClick={() => void copy()}>
      {copied ? "Copied" : "Copy"}
    </button>
  );
}

/** A QR code of the URL, as an image (qrcode's SVG in a data: URL, which the dashboard's CSP allows for images). */
export function QrCode({ url, label }: { url: string; label: string }) {
  const [src, setSrc] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    void QRCode.toString(url, { type: "svg", margin: 2, errorCorrectionLevel: "M" }).then((svg) => live && setSrc(`data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`));
    return () => void (live = false);
  }, [url]);
  return src ? <img class="qr" src={src} alt={label} width={192} height={192} data-url={url} /> : <div class="qr" aria-hidden="true" />;
}

/** One link's QR code (to print or show at a till), its URL, and the payments it took. */
function LinkDetail({ link, onClose }: { link: PaymentLink; onClose: () => void }) {
  const { data, error, loading } = useQuery(PAYMENTS, { id: String(link.databaseId) });
  const payments = data?.paymentLink.__typename === "PaymentLink" ? data.paymentLink.payments : undefined;
  return (
    <section class="card" id="payment-link-detail" aria-labelledby="payment-link-detail-title">
      <div class="section-header">
        <h2 id="payment-link-detail-title">{link.description}</h2>
        <button type="button" class="secondary small" onClick={onClose}>
          Close
        </button>
      </div>
      <div class="link-detail">
        <QrCode url={link.url} label={`QR code of the payment link for ${link.description}`} />
        <div>
          <p>
            {amountText(link)} · {link.reusable ? "Reusable" : "Single use"}
          </p>
          <code class="secret-value">{link.url}</code>
          <p class="muted hint">Payers scan the code with their phone's camera to open the link.</p>
        </div>
      </div>
      <h3>Payments through this link</h3>
      <Listing items={payments} loading={loading} error={error} empty={<p class="muted">No payments yet.</p>}>
        {(rows) => (
          <Table
            label={`Payments through ${link.description}`}
            bodyId="payment-link-payments"
            rows={rows}
            rowKey="reference"
            rowProps={(t) => ({ "data-reference": t.reference, "data-status": t.status })}
            columns={[
              {
                label: "Reference",
                class: "mono",
                cell: (t) => (
                  <a href={`${BASE}/transactions/${encodeURIComponent(t.reference)}`} onClick={(e) => onLinkClick(e, `/transactions/${encodeURIComponent(t.reference)}`)}>
                    {t.reference}
                  </a>
                ),
              },
              { label: "Status", cell: (t) => <Badge value={t.status} /> },
              { label: "Amount", num: true, cell: (t) => formatMoney(t.amount, t.currency) },
              { label: "Payer", cell: (t) => t.phoneNumber ?? t.email ?? "—", note: (t) => (t.paymentMethod ? titleCase(t.paymentMethod) : null) },
              { label: "Date", cell: (t) => formatDate(t.createdAt) },
            ]}
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
