import { useState } from "preact/hooks";
import { ApiError, mutate } from "../api.ts";
import { formatDate, formatMoney, parseMajorUnits, titleCase } from "../format.ts";
import { CardForm, useFocusOnMount } from "../forms.tsx";
import { graphql } from "../gql/index.ts";
import type { DashboardPayoutChannelsQuery, PayoutCommand } from "../gql/graphql.ts";
import { CursorPager, useCursors } from "../paging.tsx";
import type { Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, EmptyState, PageHeader, announce, useQuery } from "../ui.tsx";
import { providerCallsColumn } from "./provider-calls.tsx";

const QUERY = graphql(`
  query DashboardPayouts($first: Int!, $after: String) {
    payouts(first: $first, after: $after) {
      totalCount pageInfo { ...DashboardPageInfo }
      edges { node { databaseId reference status amount currency phoneNumber description providerReference failureReason createdAt } }
    }
  }
`);
const CHANNELS = graphql(`
  query DashboardPayoutChannels { viewer { defaultCurrency } paymentChannels { databaseId name provider isActive isDefault } }
`);
const CREATE = graphql(`
  mutation DashboardCreatePayout($input: CreatePayoutInput!) {
    createPayout(input: $input) { __typename ...DashboardError ... on Payout { reference status amount currency phoneNumber } }
  }
`);
type Channel = DashboardPayoutChannelsQuery["paymentChannels"][number];

/** Providers whose channels send money to a phone (Paystack channels collect only). */
const PAYS_OUT = new Set(["mpesa", "sandbox"]);
const PURPOSES: readonly PayoutCommand[] = ["BusinessPayment", "SalaryPayment", "PromotionPayment"];
const PURPOSE_WORDS: Record<PayoutCommand, string> = { BusinessPayment: "Business payment", SalaryPayment: "Salary", PromotionPayment: "Promotion" };

/** The payouts list; owners also get "Send a payout" (the API refuses it to everyone else anyway). */
export function Payouts({ session }: { session: Session }) {
  const cursors = useCursors();
  const { data, error, loading, reload } = useQuery(QUERY, { first: 20, after: cursors.after });
  const [sending, setSending] = useState(false);
  // A new form is a new payout: its key is made when it opens (see PayoutForm).
  const [formKey, setFormKey] = useState(0);
  const owner = session.user.role === "owner";
  const connection = data?.payouts;
  return (
    <section>
      <PageHeader title="Payouts">
        {owner && !sending && (
          <button type="button" id="send-payout" onClick={() => (setFormKey(formKey + 1), setSending(true))}>
            Send a payout
          </button>
        )}
      </PageHeader>
      {owner && sending && (
        <PayoutForm
          key={formKey}
          onCancel={() => setSending(false)}
          onSent={() => {
            setSending(false);
            cursors.reset();
            void reload();
          }}
        />
      )}
      <Listing
        items={connection?.edges.map((edge) => edge.node)}
        loading={loading}
        error={error}
        empty={
          <EmptyState title="No payouts yet">
            <p>Payouts send money to a phone through an M-Pesa channel. Owners send them from here or through the API (createPayout or POST /v1/payouts).</p>
          </EmptyState>
        }
      >
        {(payouts) => (
          <Table
            label="Payouts"
            bodyId="payout-rows"
            rows={payouts}
            rowKey="databaseId"
            rowProps={(payout) => ({ "data-reference": payout.reference, "data-status": payout.status })}
            columns={[
              { label: "Reference", class: "mono", cell: (payout) => payout.reference, note: (payout) => payout.description },
              { label: "Status", cell: (payout) => <Badge value={payout.status} />, note: (payout) => payout.failureReason },
              { label: "Amount", num: true, cell: (payout) => formatMoney(payout.amount, payout.currency) },
              { label: "Phone", cell: (payout) => payout.phoneNumber },
              { label: "Receipt", cell: (payout) => payout.providerReference ?? "—" },
              { label: "Date", cell: (payout) => formatDate(payout.createdAt) },
              ...providerCallsColumn("payout"),
            ]}
          />
        )}
      </Listing>
      {connection && <CursorPager cursors={cursors} pageInfo={connection.pageInfo} />}
    </section>
  );
}

interface Draft {
  channel: Channel;
  amount: number;
  currency: string;
  phone: string;
  purpose: PayoutCommand;
  reason: string;
}

/**
 * Send a payout in two steps: the form, then a confirmation that repeats amount, recipient and channel. The form's
 * Idempotency-Key is made when it opens and sent with every createPayout of it: a double click on Confirm, or a retry
 * after a lost answer, is one payout (the gateway answers the second with the first's payout).
 */
function PayoutForm({ onSent, onCancel }: { onSent: () => void; onCancel: () => void }) {
  const [idempotencyKey] = useState(() => crypto.randomUUID());
  const channels = useQuery(CHANNELS);
  const usable = channels.data?.paymentChannels.filter((c) => c.isActive && PAYS_OUT.has(c.provider)) ?? [];
  const currency = channels.data?.viewer.defaultCurrency ?? "KES";
  const [channelId, setChannelId] = useState("");
  const [amount, setAmount] = useState("");
  const [phone, setPhone] = useState("");
  const [purpose, setPurpose] = useState<PayoutCommand>("BusinessPayment");
  const [reason, setReason] = useState("");
  const [draft, setDraft] = useState<Draft | null>(null);
  const amountRef = useFocusOnMount<HTMLInputElement>();
  const chosen = usable.find((c) => String(c.databaseId) === channelId) ?? usable.find((c) => c.isDefault) ?? usable[0];

  if (draft) return <ConfirmPayout draft={draft} idempotencyKey={idempotencyKey} onBack={() => setDraft(null)} onSent={onSent} />;

  const review = async () => {
    if (!chosen) throw new ApiError("No active channel can send payouts: add an M-Pesa channel first.", "validation_failed");
    const minor = parseMajorUnits(amount, currency);
    if (minor === null || minor <= 0) throw new ApiError(`Amount: enter it in ${currency}, e.g. 1500`, "validation_failed");
    if (!phone.trim()) throw new ApiError("Recipient's phone: enter the M-Pesa number that receives the money", "validation_failed");
    setDraft({ channel: chosen, amount: minor, currency, phone: phone.trim(), purpose, reason: reason.trim() });
  };
  return (
    <CardForm title="Send a payout" titleId="payout-title" id="payout-form" submit="Review payout" onSubmit={review} onCancel={onCancel}>
      <p class="muted hint">Money leaves the channel's balance for the recipient's M-Pesa wallet. You confirm it on the next step.</p>
      <div class="grid">
        <div class="field">
          <label for="payout-amount">Amount ({currency})</label>
          <input id="payout-amount" ref={amountRef} type="text" inputMode="decimal" autoComplete="off" required value={amount} onInput={(e) => setAmount(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="payout-phone">Recipient's M-Pesa phone</label>
          <input id="payout-phone" type="tel" autoComplete="off" required placeholder="0712 345 678" value={phone} onInput={(e) => setPhone(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="payout-channel">Channel</label>
          <select id="payout-channel" value={chosen ? String(chosen.databaseId) : ""} onChange={(e) => setChannelId(e.currentTarget.value)}>
            {usable.length === 0 && <option value="">{channels.loading ? "Loading…" : "No channel can pay out"}</option>}
            {usable.map((c) => (
              <option key={c.databaseId} value={String(c.databaseId)}>
                {c.name} ({titleCase(c.provider)})
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="payout-purpose">Type</label>
          <select id="payout-purpose" value={purpose} onChange={(e) => setPurpose(e.currentTarget.value as PayoutCommand)}>
            {PURPOSES.map((value) => (
              <option key={value} value={value}>
                {PURPOSE_WORDS[value]}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="payout-reason">Reason (sent as the payout's remarks)</label>
          <input id="payout-reason" type="text" maxLength={100} value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
        </div>
      </div>
    </CardForm>
  );
}

function ConfirmPayout({ draft, idempotencyKey, onBack, onSent }: { draft: Draft; idempotencyKey: string; onBack: () => void; onSent: () => void }) {
  const confirm = async () => {
    const input = {
      amount: draft.amount,
      currency: draft.currency,
      phoneNumber: draft.phone,
      paymentChannelId: draft.channel.databaseId,
      commandId: draft.purpose,
      ...(draft.reason ? { description: draft.reason } : {}),
    };
    // The same key and body every time: a second click while the first is still running is told the key is in use;
    // it then waits for the first's answer, which the gateway replays.
    for (let attempt = 0; ; attempt++) {
      try {
        const payout = await mutate(CREATE, "createPayout", { input }, { idempotencyKey });
        announce(`Payout ${payout.reference} of ${formatMoney(payout.amount, payout.currency)} to ${payout.phoneNumber} started: ${payout.status}`);
        onSent();
        return;
      } catch (error) {
        if (!(error instanceof ApiError && error.code === "idempotency_key_in_use") || attempt >= 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  };
  return (
    <CardForm title="Confirm the payout" titleId="payout-confirm-title" id="payout-confirm" submit="Confirm payout" onSubmit={confirm} onCancel={onBack}>
      <dl class="fields" id="payout-summary">
        <div>
          <dt>Amount</dt>
          <dd id="payout-confirm-amount">{formatMoney(draft.amount, draft.currency)}</dd>
        </div>
        <div>
          <dt>Recipient</dt>
          <dd id="payout-confirm-recipient">{draft.phone}</dd>
        </div>
        <div>
          <dt>Channel</dt>
          <dd id="payout-confirm-channel">
            {draft.channel.name} ({titleCase(draft.channel.provider)})
          </dd>
        </div>
        <div>
          <dt>Type</dt>
          <dd>{PURPOSE_WORDS[draft.purpose]}</dd>
        </div>
        {draft.reason && (
          <div>
            <dt>Reason</dt>
            <dd>{draft.reason}</dd>
          </div>
        )}
      </dl>
      <p class="hint">
        Send {formatMoney(draft.amount, draft.currency)} to {draft.phone} through {draft.channel.name}? This cannot be undone.
      </p>
    </CardForm>
  );
}
