import { useEffect, useRef, useState } from "preact/hooks";
import { formatDate, titleCase } from "../format.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardMailMessageFragment } from "../gql/graphql.ts";
import { onLiveStatus, onRefundEvent, onTransactionEvent } from "../live.ts";
import { NumberedPager } from "../paging.tsx";
import { BASE, navigate, onLinkClick } from "../router.ts";
import { Listing, StatusFilter, Table } from "../tables.tsx";
import { Badge, EmptyState, ErrorNote, Loading, PageHeader, useQuery } from "../ui.tsx";

/**
 * The test inbox (/inbox, test mode): the e-mails the gateway wrote in test mode, kept rather than sent while no SMTP
 * server is configured: receipts to payers and notices to the team. The list (GraphQL `mailMessages`, newest first,
 * kept ones unless another status is chosen) and, at /inbox/:id, one message as written: its HTML part in a sandboxed
 * frame (no scripts, an opaque origin) and its plain-text part. Also the e-mails of a payment, on its page.
 */

/** A message as lists show it (the inbox, a payment's page): no bodies, which the message's own query loads. */
graphql(`fragment DashboardMailMessage on MailMessage { databaseId kind status toAddress subject lastError createdAt sentAt }`);
export type MailMessage = DashboardMailMessageFragment;

const PAGE_SIZE = 20;
const LIST = graphql(`
  query DashboardMailMessages($status: String, $first: Int, $offset: Int) {
    mailMessages(status: $status, first: $first, offset: $offset) {
      __typename
      ...DashboardError
      ... on MailMessagePage { total items { ...DashboardMailMessage } }
    }
  }
`);
const MESSAGE = graphql(`
  query DashboardMailMessage($id: Int!) {
    mailMessage(id: $id) { __typename ...DashboardError ... on MailMessage { ...DashboardMailMessage sender language attempts textBody htmlBody } }
    brand { logoUrl }
  }
`);

const STATUSES = ["queued", "sent", "kept", "skipped", "failed"] as const;
type MailStatus = (typeof STATUSES)[number];
/** The badge colour of each status: handed over, in the test inbox, waiting, not written (see its reason), refused. */
const STATUS_KINDS: Record<string, string> = { sent: "completed", kept: "info", queued: "pending", skipped: "skipped", failed: "failed" };

export function MailStatusBadge({ status }: { status: string }) {
  return <Badge value={status} kind={STATUS_KINDS[status] ?? status} />;
}

/** "Payment receipt", "Dispute opened", ... */
export const mailKind = (kind: string) => titleCase(kind);

/**
 * The HTML part as the frame shows it. The logo is an inline attachment of the e-mail (src="cid:..."), which only a
 * mail client resolves: here it is the brand's logo as a data: URL (`logo`), or nothing when there is none.
 */
export function framedHtml(html: string, logo: string | null): string {
  return html.replace(/(<img\b[^>]*?\bsrc=")cid:[^"]*"/gi, (_match, start: string) => `${start}${logo ?? ""}"`);
}

/**
 * The brand's logo as a data: URL, read here (same origin) for the frame: the frame's origin is opaque, so the logo's
 * route (Cross-Origin-Resource-Policy: same-origin) would refuse it the image. Null once there is none or it failed.
 */
function useLogoData(url: string | null | undefined): { ready: boolean; data: string | null } {
  const [state, setState] = useState<{ of: string | null; data: string | null }>({ of: null, data: null });
  useEffect(() => {
    if (!url) return;
    let current = true;
    void fetch(url)
      .then((response) => (response.ok ? response.blob() : null))
      .then(
        (blob) =>
          new Promise<string | null>((resolve) => {
            if (!blob) return resolve(null);
            const reader = new FileReader();
            reader.onload = () => resolve(typeof reader.result === "string" ? reader.result : null);
            reader.onerror = () => resolve(null);
            reader.readAsDataURL(blob);
          }),
      )
      .catch(() => null)
      .then((data) => current && setState({ of: url, data }));
    return () => void (current = false);
  }, [url]);
  return url ? { ready: state.of === url, data: state.of === url ? state.data : null } : { ready: true, data: null };
}

/** An e-mail address that may wrap after its "@" (a narrow column), and nowhere else. */
function Address({ value }: { value: string }) {
  const at = value.lastIndexOf("@");
  return at > 0 ? (
    <>
      {value.slice(0, at + 1)}
      <wbr />
      {value.slice(at + 1)}
    </>
  ) : (
    <>{value}</>
  );
}

export function Inbox({ route }: { route: string }) {
  const open = /^\/inbox\/(\d+)$/.exec(route);
  const openId = open ? Number(open[1]) : null;
  const [status, setStatus] = useState<MailStatus | "">("kept");
  const [page, setPage] = useState(1);
  const { data, error, loading, reload } = useQuery(LIST, { status: status || null, first: PAGE_SIZE, offset: (page - 1) * PAGE_SIZE });
  // A payment completed or a refund settled here writes a receipt; its job keeps it a moment later (no event says so).
  useEffect(() => {
    const timers = new Set<ReturnType<typeof setTimeout>>();
    const soon = () => {
      void reload();
      const timer = setTimeout(() => (timers.delete(timer), void reload()), 2000);
      timers.add(timer);
    };
    const offTransaction = onTransactionEvent((event) => event.type === "transaction.completed" && soon());
    const offRefund = onRefundEvent(() => soon());
    return () => {
      offTransaction();
      offRefund();
      timers.forEach(clearTimeout);
    };
  }, [reload]);
  useEffect(() => onLiveStatus((_status, reconnected) => reconnected && void reload()), [reload]);

  const result = data?.mailMessages;
  const list = result?.__typename === "MailMessagePage" ? result : null;
  const failure = result && result.__typename !== "MailMessagePage" ? (result as { message: string }).message : null;
  const pages = list ? Math.max(1, Math.ceil(list.total / PAGE_SIZE)) : 1;
  const path = (message: MailMessage) => `/inbox/${message.databaseId}`;

  return (
    <section class={`inbox${openId ? " has-open" : ""}`}>
      <PageHeader title="Inbox">
        <button type="button" class="secondary small" id="inbox-refresh" disabled={loading} onClick={() => void reload()}>
          Refresh
        </button>
      </PageHeader>
      <p class="muted">E-mails the gateway wrote in test mode: receipts to your payers and notices to your team. Nothing here reaches a real inbox unless an SMTP server is configured.</p>
      <div class="inbox-layout">
        <div class="inbox-list">
          <StatusFilter id="mail-status" label="Filter e-mails" statuses={STATUSES} value={status} onChange={(value) => (setStatus(value), setPage(1))} />
          <Listing
            items={list?.items}
            loading={loading}
            error={error ?? failure}
            empty={
              status === "kept" ? (
                <EmptyState title="No e-mails in the test inbox">
                  <p>No SMTP server is configured, so test-mode e-mails are kept here instead of being sent.</p>
                  <p class="muted">A test payment with the payer's e-mail brings its receipt here a moment after it completes.</p>
                </EmptyState>
              ) : (
                <EmptyState title="No e-mails match this filter" />
              )
            }
          >
            {(messages) => (
              <>
                <p class="muted count" id="mail-count">
                  {list!.total === 1 ? "1 e-mail" : `${list!.total} e-mails`}
                </p>
                <Table
                  label="E-mails"
                  bodyId="mail-rows"
                  rows={messages}
                  rowKey="databaseId"
                  rowProps={(message) => ({
                    "data-id": String(message.databaseId),
                    "data-kind": message.kind,
                    "data-status": message.status,
                    class: `clickable${message.databaseId === openId ? " selected" : ""}`,
                    onClick: () => navigate(path(message)),
                  })}
                  columns={[
                    {
                      label: "Subject",
                      class: "break",
                      cell: (message) => (
                        <a
                          href={BASE + path(message)}
                          aria-current={message.databaseId === openId ? "true" : undefined}
                          onClick={(e) => (e.stopPropagation(), onLinkClick(e, path(message)))}
                        >
                          {message.subject ?? `(${mailKind(message.kind).toLowerCase()})`}
                        </a>
                      ),
                    },
                    { label: "To", cell: (message) => (message.toAddress ? <Address value={message.toAddress} /> : <span class="muted">Not written yet</span>) },
                    { label: "Kind", cell: (message) => mailKind(message.kind) },
                    { label: "Status", cell: (message) => <MailStatusBadge status={message.status} />, note: (message) => message.lastError },
                    { label: "Created", cell: (message) => formatDate(message.createdAt) },
                  ]}
                />
              </>
            )}
          </Listing>
          {list && <NumberedPager list={{ page, pages }} onPage={setPage} />}
        </div>
        {openId !== null && (
          <div class="inbox-message">
            <MailView key={openId} id={openId} />
          </div>
        )}
      </div>
    </section>
  );
}

/** One message as written: who it went to, its status, its HTML part (sandboxed) and its plain-text part. */
function MailView({ id }: { id: number }) {
  const { data, error, loading } = useQuery(MESSAGE, { id });
  const heading = useRef<HTMLHeadingElement>(null);
  const message = data?.mailMessage.__typename === "MailMessage" ? data.mailMessage : null;
  const logo = useLogoData(message?.htmlBody?.includes("cid:") ? data?.brand.logoUrl : null);
  // Opening a message takes the reader to it (on a phone the list is hidden meanwhile).
  useEffect(() => {
    if (message) heading.current?.focus();
  }, [message?.databaseId]);

  const back = (
    <a href={`${BASE}/inbox`} onClick={(e) => onLinkClick(e, "/inbox")} class="back">
      ← All e-mails
    </a>
  );
  if (!data || !message) {
    return (
      <article class="card mail-view" aria-busy={loading}>
        {back}
        {data && !message ? <p>{(data.mailMessage as { message: string }).message}</p> : loading ? <Loading /> : <ErrorNote message={error} />}
      </article>
    );
  }
  const subject = message.subject ?? `(${mailKind(message.kind).toLowerCase()}, not written yet)`;
  return (
    <article class="card mail-view" id="mail-view" aria-labelledby="mail-subject" data-id={message.databaseId}>
      {back}
      <h2 id="mail-subject" ref={heading} tabIndex={-1}>
        {subject}
      </h2>
      <dl class="mail-meta" id="mail-meta">
        <div>
          <dt>From</dt>
          <dd id="mail-from">{message.sender}</dd>
        </div>
        <div>
          <dt>To</dt>
          <dd id="mail-to">{message.toAddress ?? "—"}</dd>
        </div>
        <div>
          <dt>Kind</dt>
          <dd>{mailKind(message.kind)}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd>
            <MailStatusBadge status={message.status} />
            {message.lastError && <span class="muted block">{message.lastError}</span>}
          </dd>
        </div>
        <div>
          <dt>Language</dt>
          <dd>{message.language === "sw" ? "Kiswahili" : message.language === "en" ? "English" : "—"}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>{formatDate(message.createdAt)}</dd>
        </div>
        <div>
          <dt>{message.status === "kept" ? "Kept" : "Sent"}</dt>
          <dd>{formatDate(message.sentAt)}</dd>
        </div>
      </dl>
      <h3>As the payer's mail client shows it</h3>
      {message.htmlBody && !logo.ready ? (
        <Loading />
      ) : message.htmlBody ? (
        // sandbox="" before srcdoc: no scripts, no forms, and an opaque origin, so the message can reach nothing of the dashboard.
        <iframe class="mail-frame" id="mail-frame" sandbox="" srcdoc={framedHtml(message.htmlBody, logo.data)} title={`The e-mail “${subject}”`} />
      ) : (
        <p class="muted">No HTML part: the message was not written ({message.status}).</p>
      )}
      <h3>Plain text</h3>
      {message.textBody ? (
        <pre class="mail-text" id="mail-text">
          {message.textBody}
        </pre>
      ) : (
        <p class="muted">No plain-text part.</p>
      )}
    </article>
  );
}

/** A payment's e-mails on its page: kind, recipient, status (with why one was skipped or failed) and time; each opens in the inbox when `linked`. */
export function MailTable({ messages, linked }: { messages: MailMessage[]; linked: boolean }) {
  return (
    <Table
      label="E-mails"
      bodyId="transaction-mails"
      rows={messages}
      rowKey="databaseId"
      rowProps={(message) => ({ "data-id": String(message.databaseId), "data-kind": message.kind, "data-status": message.status })}
      columns={[
        {
          label: "Kind",
          cell: (message) =>
            linked ? (
              <a href={`${BASE}/inbox/${message.databaseId}`} onClick={(e) => onLinkClick(e, `/inbox/${message.databaseId}`)}>
                {mailKind(message.kind)}
              </a>
            ) : (
              mailKind(message.kind)
            ),
          note: (message) => message.subject,
        },
        { label: "To", class: "break", cell: (message) => message.toAddress ?? "—" },
        { label: "Status", cell: (message) => <MailStatusBadge status={message.status} />, note: (message) => message.lastError },
        { label: "Created", cell: (message) => formatDate(message.createdAt), note: (message) => message.sentAt && `${message.status === "kept" ? "Kept" : "Sent"} ${formatDate(message.sentAt)}` },
      ]}
    />
  );
}
