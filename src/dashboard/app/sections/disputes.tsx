import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, mutate, rest } from "../api.ts";
import { CardForm } from "../forms.tsx";
import { formatDate, formatMoney, titleCase } from "../format.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardDisputeDetailFragment, DashboardDisputeFragment, DisputeStatus } from "../gql/graphql.ts";
import { onDisputeEvent, onLiveStatus } from "../live.ts";
import { NumberedPager } from "../paging.tsx";
import { BASE, navigate, onLinkClick } from "../router.ts";
import { canWrite, type Session } from "../session.ts";
import { Listing, StatusFilter, Table } from "../tables.tsx";
import { BackLink, Badge, ConfirmButton, DetailFields, DetailMissing, EmptyState, ErrorNote, PageHeader, announce, useAction, useQuery, type DetailField } from "../ui.tsx";

/**
 * Disputes (chargebacks): the list (GraphQL `disputesPage`: open ones first, soonest deadline first) with the time
 * left to answer in words, and a dispute's page, where an owner (or a developer in test mode) answers it before its
 * deadline: evidence (a draft, then submitted) with files, or accepting the loss.
 */

/** A dispute as lists show it (the Disputes page, a transaction's page). */
graphql(`
  fragment DashboardDispute on Dispute { reference transactionReference amount currency reason status dueBy createdAt closedAt }
`);
type Dispute = DashboardDisputeFragment;
graphql(`
  fragment DashboardDisputeDetail on Dispute {
    ...DashboardDispute providerReference evidenceSubmittedAt fee
    evidence { customerName customerEmail customerPhone serviceDetails deliveryAddress deliveryDate uploadedFiles }
    messages { sender body createdAt }
    files { id name size contentType }
    transaction { amount currency email }
  }
`);
type Detail = DashboardDisputeDetailFragment;

const PAGE_SIZE = 20;
const LIST = graphql(`
  query DashboardDisputes($page: Int, $limit: Int, $status: DisputeStatus) {
    disputesPage(page: $page, limit: $limit, status: $status) {
      __typename
      ...DashboardError
      ... on DisputePage { total page pages items { ...DashboardDispute } }
    }
  }
`);
const DETAIL = graphql(`
  query DashboardDisputeDetail($id: String!) { dispute(id: $id) { __typename ...DashboardError ... on Dispute { ...DashboardDisputeDetail } } }
`);
const SUBMIT = graphql(`
  mutation DashboardSubmitDisputeEvidence($input: SubmitDisputeEvidenceInput!) {
    submitDisputeEvidence(input: $input) { __typename ...DashboardError ... on Dispute { ...DashboardDisputeDetail } }
  }
`);
const ACCEPT = graphql(`
  mutation DashboardAcceptDispute($id: String!) { acceptDispute(id: $id) { __typename ...DashboardError ... on Dispute { ...DashboardDisputeDetail } } }
`);

const STATUSES: DisputeStatus[] = ["needs_response", "under_review", "won", "lost"];
/** The badge colour of each status: waiting on the merchant, waiting on the bank, money back, money gone. */
const STATUS_KINDS: Record<DisputeStatus, string> = { needs_response: "pending", under_review: "info", won: "completed", lost: "failed" };

export function DisputeBadge({ status }: { status: DisputeStatus }) {
  return <Badge value={status} kind={STATUS_KINDS[status]} />;
}

/** A transaction's "Disputed: <status>" badge (nothing when it was never disputed). */
export function DisputedBadge({ payment }: { payment: { disputeStatus?: string | null } }) {
  const status = payment.disputeStatus as DisputeStatus | null | undefined;
  return status ? <Badge value={`disputed: ${status}`} kind={STATUS_KINDS[status] ?? "info"} /> : null;
}

const plural = (count: number, unit: string) => `${count} ${unit}${count === 1 ? "" : "s"}`;

/**
 * The time left to answer, as a merchant says it: "due in 40 minutes", "due in 5 hours" (up to two days, so a
 * 48-hour deadline reads in hours), "due in 3 days", "overdue" once past. Rounded down: never more time than there is.
 */
export function timeLeft(dueBy: string, now: number): string {
  const left = Date.parse(dueBy) - now;
  if (left <= 0) return "overdue";
  const minutes = Math.floor(left / 60_000);
  if (minutes < 1) return "due in under a minute";
  if (minutes < 60) return `due in ${plural(minutes, "minute")}`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `due in ${plural(hours, "hour")}` : `due in ${plural(Math.floor(hours / 24), "day")}`;
}

/** The clock the deadlines count down from, ticking every minute so "due in ..." stays true on an open page. */
function useNow(): number {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 60_000);
    return () => clearInterval(timer);
  }, []);
  return now;
}

const isOverdue = (dispute: Dispute, now: number) => dispute.status === "needs_response" && dispute.dueBy !== null && Date.parse(dispute.dueBy) <= now;

/** Where a dispute stands in time: the time left while it awaits an answer, the outcome and its date once closed. */
function Deadline({ dispute, now }: { dispute: Dispute; now: number }) {
  if (dispute.status === "won" || dispute.status === "lost") {
    return (
      <span class="deadline">
        {titleCase(dispute.status)} {formatDate(dispute.closedAt)}
      </span>
    );
  }
  if (dispute.status === "under_review") return <span class="deadline">Awaiting the bank's decision</span>;
  if (!dispute.dueBy) return <span class="deadline">No deadline given</span>;
  const urgent = Date.parse(dispute.dueBy) - now < 24 * 3_600_000;
  return (
    <span class={`deadline${isOverdue(dispute, now) ? " overdue" : urgent ? " due-soon" : ""}`} title={`Answer by ${formatDate(dispute.dueBy)}`}>
      {titleCase(timeLeft(dispute.dueBy, now))}
    </span>
  );
}

function TransactionLink({ reference }: { reference: string }) {
  return (
    <a href={`${BASE}/transactions/${reference}`} onClick={(e) => (e.stopPropagation(), onLinkClick(e, `/transactions/${reference}`))} class="mono">
      {reference}
    </a>
  );
}

/** Disputes as rows, each opening its page: the Disputes list, and a transaction's disputes. */
export function DisputesTable({ disputes, bodyId, withTransaction = true }: { disputes: Dispute[]; bodyId: string; withTransaction?: boolean }) {
  const now = useNow();
  const transaction = { label: "Transaction", cell: (d: Dispute) => <TransactionLink reference={d.transactionReference} /> };
  return (
    <Table
      label="Disputes"
      bodyId={bodyId}
      rows={disputes}
      rowKey="reference"
      rowProps={(d) => ({ "data-reference": d.reference, "data-status": d.status, class: "clickable", onClick: () => navigate(`/disputes/${d.reference}`) })}
      columns={[
        {
          label: "Dispute",
          cell: (d) => (
            <a href={`${BASE}/disputes/${d.reference}`} onClick={(e) => (e.stopPropagation(), onLinkClick(e, `/disputes/${d.reference}`))} class="mono">
              {d.reference}
            </a>
          ),
        },
        ...(withTransaction ? [transaction] : []),
        { label: "Amount", num: true, cell: (d) => formatMoney(d.amount, d.currency) },
        { label: "Reason", cell: (d) => titleCase(d.reason) },
        { label: "Status", cell: (d) => <DisputeBadge status={d.status} /> },
        { label: "Deadline", cell: (d) => <Deadline dispute={d} now={now} />, note: (d) => (d.status === "needs_response" && d.dueBy ? formatDate(d.dueBy) : null) },
      ]}
    />
  );
}

export function Disputes({ route, session }: { route: string; session: Session }) {
  const detail = /^\/disputes\/([^/]+)$/.exec(route);
  return detail ? <DisputePage id={decodeURIComponent(detail[1]!)} session={session} /> : <DisputeList />;
}

function DisputeList() {
  const [status, setStatus] = useState<DisputeStatus | "">("");
  const [page, setPage] = useState(1);
  const { data, error, loading, reload } = useQuery(LIST, { page, limit: PAGE_SIZE, status: status || null });
  // A dispute opened, answered or closed anywhere: the order and the deadlines change, so load the page again.
  useEffect(() => onDisputeEvent(() => void reload()), [reload]);
  useEffect(() => onLiveStatus((_status, reconnected) => reconnected && void reload()), [reload]);
  const result = data?.disputesPage;
  const list = result?.__typename === "DisputePage" ? result : null;
  const failure = result && result.__typename !== "DisputePage" ? (result as { message: string }).message : null;
  return (
    <section>
      <PageHeader title="Disputes" />
      <p class="muted">
        When a payer's bank disputes a card payment, its amount is held from your balance until the dispute closes. Answer each one before its deadline: submit evidence
        to contest it, or accept it. One left unanswered is lost.
      </p>
      <StatusFilter id="dispute-status" label="Filter disputes" statuses={STATUSES} value={status} onChange={(value) => (setStatus(value), setPage(1))} />
      <Listing
        items={list?.items}
        loading={loading}
        error={error ?? failure}
        empty={
          status ? (
            <EmptyState title="No disputes match this filter" />
          ) : (
            <EmptyState title="No disputes">
              <p>Disputes (chargebacks) of your card payments appear here, soonest deadline first. In test mode, a payment with the test card 4000 0000 0000 0259 is disputed shortly after it is paid.</p>
            </EmptyState>
          )
        }
      >
        {(disputes) => (
          <>
            <p class="muted count" id="disputes-count">
              {plural(list!.total, "dispute")}
            </p>
            <DisputesTable disputes={disputes} bodyId="disputes-rows" />
          </>
        )}
      </Listing>
      {list && <NumberedPager list={list} onPage={setPage} />}
    </section>
  );
}

const fileSize = (bytes: number) => (bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${Math.round(bytes / 1024)} KB` : `${(bytes / 1024 / 1024).toFixed(1)} MB`);

function DisputePage({ id, session }: { id: string; session: Session }) {
  const { data, error, loading, reload, setData } = useQuery(DETAIL, { id });
  const accepting = useAction();
  const now = useNow();
  useEffect(() => onDisputeEvent((event) => event.dispute.reference === id && void reload()), [id, reload]);
  useEffect(() => onLiveStatus((_status, reconnected) => reconnected && void reload()), [reload]);

  const back = <BackLink route="/disputes" label="All disputes" />;
  if (!data) return <DetailMissing back={back} loading={loading} error={error} />;
  if (data.dispute.__typename !== "Dispute") return <DetailMissing back={back} loading={loading} error={error} notFound={{ title: "Dispute not found", message: (data.dispute as { message: string }).message }} />;
  const dispute = data.dispute as Detail;
  const show = (fresh: Detail) => setData(() => ({ dispute: { __typename: "Dispute" as const, ...fresh } }));
  // Answered by owners, and developers in test mode (as the API decides), while it awaits an answer and is not overdue.
  const overdue = isOverdue(dispute, now);
  const answerable = canWrite(session) && dispute.status === "needs_response" && !overdue;
  const accept = () =>
    void accepting.run(async () => {
      show(await mutate(ACCEPT, "acceptDispute", { id: dispute.reference }));
      announce(`Dispute ${dispute.reference} accepted: lost`);
    });

  // What matters now first: the time left while it awaits an answer, when it closed once it has.
  const open = dispute.status === "needs_response";
  const fields = ([
    ["Status", <DisputeBadge status={dispute.status} />],
    ["Amount", formatMoney(dispute.amount, dispute.currency)],
    ["Reason", titleCase(dispute.reason)],
    open ? ["Time left", <Deadline dispute={dispute} now={now} />] : null,
    [open ? "Answer by" : "Deadline", dispute.dueBy ? formatDate(dispute.dueBy) : "—"],
    [
      "Transaction",
      <>
        <TransactionLink reference={dispute.transactionReference} />
        <span class="muted block">
          {formatMoney(dispute.transaction.amount, dispute.transaction.currency)}
          {dispute.transaction.email ? ` from ${dispute.transaction.email}` : ""}
        </span>
      </>,
    ],
    ["Opened", formatDate(dispute.createdAt)],
    dispute.evidenceSubmittedAt ? ["Evidence submitted", formatDate(dispute.evidenceSubmittedAt)] : null,
    dispute.closedAt ? ["Closed", formatDate(dispute.closedAt)] : null,
    ["Provider reference", <span class="mono">{dispute.providerReference}</span>],
    dispute.fee > 0 ? ["Chargeback fee", formatMoney(dispute.fee, dispute.currency)] : null,
  ] satisfies (DetailField | null)[]).filter((field) => field !== null);

  return (
    <section>
      {back}
      <PageHeader title={`Dispute ${dispute.reference}`}>
        {answerable && (
          <ConfirmButton
            label="Accept dispute"
            question={`Accept it? The payer keeps ${formatMoney(dispute.amount, dispute.currency)}, taken from your balance.`}
            confirmLabel="Yes, accept"
            disabled={accepting.busy}
            onConfirm={accept}
          />
        )}
      </PageHeader>
      <ErrorNote message={error ?? accepting.error} />
      <DetailFields id="dispute-fields" fields={fields} />
      {overdue && canWrite(session) && <p class="muted">The deadline has passed: nothing can be submitted now. The provider closes it as lost.</p>}
      <h2>Messages</h2>
      {dispute.messages.length === 0 ? (
        <p class="muted">No messages from the provider yet.</p>
      ) : (
        <ol class="timeline" id="dispute-messages">
          {dispute.messages.map((message, i) => (
            <li key={i}>
              <strong>{titleCase(message.sender)}</strong> <span class="muted">{message.createdAt ? formatDate(message.createdAt) : ""}</span>
              <span class="message-body">{message.body}</span>
            </li>
          ))}
        </ol>
      )}
      {answerable ? <EvidenceForm dispute={dispute} onSaved={show} /> : <SubmittedEvidence dispute={dispute} />}
    </section>
  );
}

const EVIDENCE_FIELDS = [
  ["customerName", "Customer name", "text", "name"],
  ["customerEmail", "Customer e-mail", "email", "email"],
  ["customerPhone", "Customer phone", "tel", "tel"],
  ["deliveryAddress", "Delivery address (optional)", "text", "street-address"],
] as const;
type EvidenceField = (typeof EVIDENCE_FIELDS)[number][0] | "deliveryDate" | "serviceDetails";
/** What submitting needs (the API's rule), named as the form labels them. */
const NEEDED_TO_SUBMIT: [EvidenceField, string][] = [
  ["customerName", "customer name"],
  ["customerEmail", "customer e-mail"],
  ["customerPhone", "customer phone"],
  ["serviceDetails", "service details"],
];

/**
 * The evidence form: a draft can be saved with any field empty; submitting (once, final) needs the customer's name,
 * e-mail and phone and the service details, as the API says. A file is uploaded when chosen (POST
 * /v1/disputes/:id/files, multipart), and every file of the dispute goes with the evidence.
 */
function EvidenceForm({ dispute, onSaved }: { dispute: Detail; onSaved: (dispute: Detail) => void }) {
  const saved = dispute.evidence;
  const [values, setValues] = useState<Record<EvidenceField, string>>({
    customerName: saved?.customerName ?? "",
    customerEmail: saved?.customerEmail ?? dispute.transaction.email ?? "",
    customerPhone: saved?.customerPhone ?? "",
    serviceDetails: saved?.serviceDetails ?? "",
    deliveryAddress: saved?.deliveryAddress ?? "",
    deliveryDate: saved?.deliveryDate ?? "",
  });
  const [files, setFiles] = useState(dispute.files);
  const [draftSaved, setDraftSaved] = useState(false);
  const uploading = useAction();
  const fileInput = useRef<HTMLInputElement>(null);
  const set = (name: EvidenceField, value: string) => {
    setValues({ ...values, [name]: value });
    setDraftSaved(false);
  };

  const send = async (submit: boolean) => {
    const missing = NEEDED_TO_SUBMIT.filter(([name]) => !values[name].trim()).map(([, label]) => label);
    if (submit && missing.length) throw new ApiError(`To submit, fill in the ${missing.join(", ")} (or save a draft for now).`, "validation_failed");
    const filled = Object.fromEntries(Object.entries(values).filter(([, value]) => value.trim() !== "")) as Partial<Record<EvidenceField, string>>;
    const fresh = await mutate(SUBMIT, "submitDisputeEvidence", { input: { dispute: dispute.reference, ...filled, uploadedFiles: files.map((file) => file.id), submit } });
    setDraftSaved(!submit);
    announce(submit ? `Evidence submitted: dispute ${dispute.reference} is under review` : "Draft saved");
    onSaved(fresh);
  };
  const upload = (file: File) =>
    void uploading.run(async () => {
      const body = new FormData();
      body.append("file", file, file.name);
      const uploaded = await rest<{ id: string; name: string; size: number; content_type: string }>(`/v1/disputes/${encodeURIComponent(dispute.reference)}/files`, { method: "POST", body });
      setFiles((current) => [...current, { id: uploaded.id, name: uploaded.name, size: uploaded.size, contentType: uploaded.content_type }]);
      announce(`${uploaded.name} uploaded`);
      if (fileInput.current) fileInput.current.value = "";
    });

  return (
    <CardForm
      title="Your evidence"
      titleId="evidence-title"
      id="evidence-form"
      submit="Submit evidence"
      onSubmit={() => send(true)}
      alternative={{ label: "Save draft", run: () => send(false) }}
      status={
        draftSaved && (
          <p class="ok" role="status">
            Draft saved. It is sent to the bank only when you submit it.
          </p>
        )
      }
    >
      <p class="muted hint">
        The payer's bank reads this. Submitting needs the customer's name, e-mail and phone and what you sold; it is sent once and cannot be changed after. A draft can be
        saved at any time.
      </p>
      <div class="grid">
        {EVIDENCE_FIELDS.map(([name, label, type, autoComplete]) => (
          <div class="field" key={name}>
            <label for={`evidence-${name}`}>{label}</label>
            {/* Preact types each input type apart; all three are text boxes, alike here. */}
            <input id={`evidence-${name}`} type={type as "text"} autoComplete={autoComplete} value={values[name]} onInput={(e) => set(name, e.currentTarget.value)} />
          </div>
        ))}
        <div class="field">
          <label for="evidence-deliveryDate">Delivery date (optional)</label>
          <input id="evidence-deliveryDate" type="date" value={values.deliveryDate} onInput={(e) => set("deliveryDate", e.currentTarget.value)} />
        </div>
      </div>
      <div class="field">
        <label for="evidence-serviceDetails">Service details</label>
        <textarea
          id="evidence-serviceDetails"
          rows={4}
          maxLength={5000}
          placeholder="What was sold, when and how it was delivered, and how the customer used it"
          value={values.serviceDetails}
          onInput={(e) => set("serviceDetails", e.currentTarget.value)}
        />
      </div>
      <div class="field">
        <label for="evidence-file">Add a file (PDF, PNG or JPEG, at most 5 MB)</label>
        <input
          id="evidence-file"
          ref={fileInput}
          type="file"
          accept="application/pdf,image/png,image/jpeg"
          disabled={uploading.busy}
          onChange={(e) => {
            const file = e.currentTarget.files?.[0];
            if (file) upload(file);
          }}
        />
        {uploading.busy && <span class="muted block">Uploading…</span>}
        <ErrorNote message={uploading.error} />
        <EvidenceFiles files={files} />
      </div>
    </CardForm>
  );
}

function EvidenceFiles({ files }: { files: Detail["files"] }) {
  if (files.length === 0) return null;
  return (
    <ul class="files" id="evidence-files">
      {files.map((file) => (
        <li key={file.id} data-id={file.id}>
          {file.name} <span class="muted">{fileSize(file.size)}</span>
        </li>
      ))}
    </ul>
  );
}

/** What was submitted (or the draft, for someone who cannot answer), read only. */
function SubmittedEvidence({ dispute }: { dispute: Detail }) {
  const evidence = dispute.evidence;
  if (!evidence) return null;
  const files = dispute.files.filter((file) => evidence.uploadedFiles.includes(file.id));
  const rows: DetailField[] = [
    ["Customer name", evidence.customerName || "—"],
    ["Customer e-mail", evidence.customerEmail || "—"],
    ["Customer phone", evidence.customerPhone || "—"],
    ["Delivery address", evidence.deliveryAddress || "—"],
    ["Delivery date", evidence.deliveryDate || "—"],
  ];
  return (
    <>
      <h2>{dispute.evidenceSubmittedAt ? "Evidence submitted" : "Evidence (draft)"}</h2>
      <DetailFields id="dispute-evidence" fields={rows}>
        <div class="wide">
          <dt>Service details</dt>
          <dd class="message-body">{evidence.serviceDetails || "—"}</dd>
        </div>
        <div class="wide">
          <dt>Files</dt>
          <dd>{files.length ? <EvidenceFiles files={files} /> : "—"}</dd>
        </div>
      </DetailFields>
    </>
  );
}
