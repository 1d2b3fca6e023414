import { useEffect, useRef, useState } from "preact/hooks";
import { mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardSubscriptionFragment, SubscriptionStatus } from "../gql/graphql.ts";
import { formatDate } from "../format.ts";
import { NumberedPager } from "../paging.tsx";
import { BASE, onLinkClick } from "../router.ts";
import { canWrite, type Session } from "../session.ts";
import { Listing, StatusFilter, Table } from "../tables.tsx";
import { Badge, EmptyState, ErrorNote, PageHeader, announce, useAction, useQuery } from "../ui.tsx";
import { planPrice } from "./plans.tsx";

/**
 * Subscriptions (GraphQL `subscriptionsPage`, newest first, filtered by status), and the table a customer's page shows
 * too. A writer cancels one at the end of its current period (it bills no more) or now (its open invoices voided).
 */
graphql(`
  fragment DashboardSubscription on BillingSubscription {
    id status customerId customer { email } plan { id name amount currency interval intervalCount }
    currentPeriodStart currentPeriodEnd cancelAtPeriodEnd canceledAt nextInvoiceAt trialEnd
  }
`);
export type Subscription = DashboardSubscriptionFragment;

const PAGE_SIZE = 20;
const LIST = graphql(`
  query DashboardSubscriptions($page: Int, $limit: Int, $status: SubscriptionStatus) {
    subscriptionsPage(page: $page, limit: $limit, status: $status) {
      __typename
      ...DashboardError
      ... on SubscriptionPage { total page pages items { ...DashboardSubscription } }
    }
  }
`);
const CANCEL = graphql(`
  mutation DashboardCancelSubscription($id: String!, $atPeriodEnd: Boolean!) {
    cancelSubscription(id: $id, atPeriodEnd: $atPeriodEnd) { __typename ...DashboardError ... on BillingSubscription { ...DashboardSubscription } }
  }
`);

const STATUSES: SubscriptionStatus[] = ["trialing", "active", "past_due", "unpaid", "canceled"];
/** The badge colour of each status: paying, not yet paying, a charge being retried, given up on; canceled is plain grey. */
const STATUS_KINDS: Record<SubscriptionStatus, string> = { active: "completed", trialing: "info", past_due: "pending", unpaid: "failed", canceled: "canceled" };

export function SubscriptionBadge({ status }: { status: SubscriptionStatus }) {
  return <Badge value={status} kind={STATUS_KINDS[status]} />;
}

export function Subscriptions({ session }: { session: Session }) {
  const [status, setStatus] = useState<SubscriptionStatus | "">("");
  const [page, setPage] = useState(1);
  const { data, error, loading, reload } = useQuery(LIST, { page, limit: PAGE_SIZE, status: status || null });
  const result = data?.subscriptionsPage;
  const list = result?.__typename === "SubscriptionPage" ? result : null;
  const failure = result && result.__typename !== "SubscriptionPage" ? (result as { message: string }).message : null;
  return (
    <section>
      <PageHeader title="Subscriptions" />
      <p class="muted">Each bills its customer's saved payment method once a period, making an invoice; a failed charge is retried on your retry schedule.</p>
      <StatusFilter id="subscription-status" label="Filter subscriptions" statuses={STATUSES} value={status} onChange={(value) => (setStatus(value), setPage(1))} />
      <Listing
        items={list?.items}
        loading={loading && !data}
        error={error ?? failure}
        empty={
          status ? (
            <EmptyState title="No subscriptions match this filter" />
          ) : (
            <EmptyState title="No subscriptions yet">
              <p>Subscribe a customer to a plan with POST /v1/subscriptions, on a payment method the customer saved at checkout.</p>
            </EmptyState>
          )
        }
      >
        {(subscriptions) => (
          <>
            <p class="muted count" id="subscriptions-count">
              {list!.total} subscription{list!.total === 1 ? "" : "s"}
            </p>
            <SubscriptionsTable subscriptions={subscriptions} session={session} onChanged={() => void reload()} />
          </>
        )}
      </Listing>
      {list && <NumberedPager list={list} onPage={setPage} />}
    </section>
  );
}

/** Subscriptions as rows, with Cancel for writers: the Subscriptions page (with their customers), and a customer's page. */
export function SubscriptionsTable({
  subscriptions,
  session,
  onChanged,
  withCustomer = true,
}: {
  subscriptions: Subscription[];
  session: Session;
  onChanged: (subscription: Subscription) => void;
  withCustomer?: boolean;
}) {
  const canceling = useAction();
  const cancel = (subscription: Subscription, atPeriodEnd: boolean) =>
    void canceling.run(async () => {
      const canceled = await mutate(CANCEL, "cancelSubscription", { id: subscription.id, atPeriodEnd });
      announce(atPeriodEnd ? `Subscription ${subscription.id} ends ${formatDate(canceled.currentPeriodEnd)}, at the end of its period` : `Subscription ${subscription.id} canceled`);
      onChanged(canceled);
    });
  const customer = {
    label: "Customer",
    class: "break",
    cell: (s: Subscription) => (
      <a href={`${BASE}/customers/${s.customerId}`} onClick={(e) => onLinkClick(e, `/customers/${s.customerId}`)}>
        {s.customer.email}
      </a>
    ),
  };
  return (
    <>
      <ErrorNote message={canceling.error} />
      <Table
        label="Subscriptions"
        bodyId="subscriptions-rows"
        rows={subscriptions}
        rowKey="id"
        rowProps={(s) => ({ "data-id": s.id, "data-status": s.status, "data-cancel-at-period-end": String(s.cancelAtPeriodEnd) })}
        columns={[
          { label: "Plan", cell: (s) => s.plan.name, note: (s) => <span class="mono">{s.id}</span> },
          ...(withCustomer ? [customer] : []),
          { label: "Price", cell: (s) => planPrice(s.plan) },
          { label: "Status", cell: (s) => <SubscriptionBadge status={s.status} />, note: (s) => endNote(s) },
          { label: "Current period", cell: (s) => `${formatDate(s.currentPeriodStart)} – ${formatDate(s.currentPeriodEnd)}` },
          // One ending with its period is invoiced no more, though the API still names when its period ends.
          { label: "Next invoice", cell: (s) => (s.cancelAtPeriodEnd ? "—" : formatDate(s.nextInvoiceAt)) },
        ]}
        actions={canWrite(session) ? (s) => s.status !== "canceled" && <CancelSubscription subscription={s} disabled={canceling.busy} onCancel={(atPeriodEnd) => cancel(s, atPeriodEnd)} /> : undefined}
      />
    </>
  );
}

/** What the status alone does not say: when a trial ends, that it ends with this period, when it was canceled. */
function endNote(s: Subscription): string | null {
  if (s.status === "canceled") return `Canceled ${formatDate(s.canceledAt)}`;
  if (s.cancelAtPeriodEnd) return `Cancels ${formatDate(s.currentPeriodEnd)}`;
  if (s.status === "trialing" && s.trialEnd) return `Trial ends ${formatDate(s.trialEnd)}`;
  return null;
}

/**
 * Cancel, asked once more, inline: at the end of the current period or now (one already ending with its period can
 * still be ended now). Focus goes to the first choice, and back to Cancel when the question is dismissed.
 */
function CancelSubscription({ subscription, disabled, onCancel }: { subscription: Subscription; disabled: boolean; onCancel: (atPeriodEnd: boolean) => void }) {
  const [asking, setAsking] = useState(false);
  const group = useRef<HTMLSpanElement>(null);
  const trigger = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);
  useEffect(() => {
    if (asking) group.current?.querySelector("button")?.focus();
    else if (asked.current) trigger.current?.focus();
    asked.current = asking;
  }, [asking]);
  const choose = (atPeriodEnd: boolean) => {
    setAsking(false);
    onCancel(atPeriodEnd);
  };
  if (!asking) {
    return (
      <button ref={trigger} type="button" class="danger-outline small" disabled={disabled} onClick={() => setAsking(true)}>
        Cancel
      </button>
    );
  }
  // Short on screen (an actions cell does not wrap); the whole question for screen readers.
  const [shown, question] = subscription.cancelAtPeriodEnd
    ? ["End now instead?", `It already ends ${formatDate(subscription.currentPeriodEnd)}. End it now instead? Its open invoices are voided.`]
    : ["End when?", `End it when this period does (${formatDate(subscription.currentPeriodEnd)}, no further invoice), or now (its open invoices voided)?`];
  return (
    <span ref={group} class="confirm" role="group" aria-label={question} onKeyDown={(event) => event.key === "Escape" && setAsking(false)}>
      <span class="confirm-question" aria-hidden="true">
        {shown}
      </span>
      {!subscription.cancelAtPeriodEnd && (
        <button type="button" class="danger small" onClick={() => choose(true)}>
          At period end
        </button>
      )}
      <button type="button" class="danger small" onClick={() => choose(false)}>
        Now
      </button>
      <button type="button" class="secondary small" onClick={() => setAsking(false)}>
        Keep it
      </button>
    </span>
  );
}
