import { useEffect, useState } from "preact/hooks";
import { errorMessage, gql, mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardChannelsQuery } from "../gql/graphql.ts";
import { bpsToPercent, feeScheduleText, percentToBps } from "../fees.ts";
import { formatDate, formatMoney, majorUnits, parseMajorUnits } from "../format.ts";
import { CardForm, useFocusOnMount } from "../forms.tsx";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, ConfirmButton, EmptyState, PageHeader, announce, useAction, useQuery } from "../ui.tsx";

const LIST = graphql(`
  query DashboardChannels {
    viewer { defaultCurrency }
    paymentChannels { databaseId name provider isActive isDefault webhookUrl createdAt feePercentBps feeFixed feeCap credentialsCheck { ok message checkedAt } }
  }
`);
const UPDATE = graphql(`
  mutation DashboardUpdateChannel($input: UpdatePaymentChannelInput!) {
    updatePaymentChannel(input: $input) { __typename ...DashboardError ... on PaymentChannel { databaseId } }
  }
`);
const ACTIVATE = graphql(`
  mutation DashboardActivateChannel($id: Int!) { activatePaymentChannel(id: $id) { __typename ...DashboardError ... on PaymentChannel { databaseId } } }
`);
const FEE_PREVIEW = graphql(`
  query DashboardFeePreview($amount: BigInt!, $feePercentBps: Int!, $feeFixed: BigInt!, $feeCap: BigInt) {
    feePreview(amount: $amount, feePercentBps: $feePercentBps, feeFixed: $feeFixed, feeCap: $feeCap) { __typename ...DashboardError ... on FeePreview { fee net } }
  }
`);
const CHECK_CREDENTIALS = graphql(`
  mutation DashboardChannelCheckCredentials($id: Int!) {
    checkChannelCredentials(id: $id) { __typename ...DashboardError ... on ChannelCredentialCheck { ok message } }
  }
`);
type Channel = DashboardChannelsQuery["paymentChannels"][number];
const CREATE = graphql(`
  mutation DashboardCreateChannel($input: CreatePaymentChannelInput!) {
    createPaymentChannel(input: $input) { __typename ...DashboardError ... on PaymentChannel { databaseId } }
  }
`);
const DEACTIVATE = graphql(`
  mutation DashboardDeactivateChannel($id: Int!) { deactivatePaymentChannel(id: $id) { __typename ...DashboardError ... on PaymentChannel { databaseId } } }
`);
const SET_DEFAULT = graphql(`
  mutation DashboardDefaultChannel($id: Int!) { setDefaultPaymentChannel(id: $id) { __typename ...DashboardError ... on PaymentChannel { databaseId } } }
`);

/** The credentials each provider takes. Secret ones are password inputs; none is ever read back. */
interface CredentialField {
  name: string;
  label: string;
  secret?: boolean;
  optional?: boolean;
  options?: string[];
  /** Sent as a boolean: the first option is true. */
  boolean?: boolean;
  /** Where the value is found (shown under the field). */
  help?: string;
  when?: (values: Record<string, string>) => boolean;
}
const PROVIDERS: Record<string, { label: string; fields: CredentialField[] }> = {
  sandbox: { label: "Sandbox (test cards and simulated M-Pesa)", fields: [] },
  paystack: {
    label: "Paystack",
    fields: [
      { name: "public_key", label: "Public key (pk_test_… or pk_live_…)", help: "Paystack dashboard: Settings, API Keys & Webhooks." },
      { name: "secret_key", label: "Secret key (sk_test_… or sk_live_…)", secret: true, help: "Same page as the public key; test keys in test mode, live keys in live mode." },
    ],
  },
  mpesa: {
    label: "M-Pesa (Daraja)",
    fields: [
      { name: "environment", label: "Daraja environment", options: ["sandbox", "production"], help: "Sandbox with an app of the Daraja portal's sandbox; production once Safaricom has taken your app live." },
      { name: "transaction_type", label: "Account type", options: ["paybill", "till"], help: "Paybill, or till (Buy Goods), as Safaricom opened your account." },
      { name: "shortcode", label: "Shortcode", help: "Your paybill number, or a till's store number, from Safaricom when the account was opened. Sandbox: 174379." },
      { name: "till_number", label: "Till number", when: (v) => v.transaction_type === "till", help: "The till number payers pay to." },
      { name: "consumer_key", label: "Consumer key", secret: true, help: "Daraja portal: My Apps, open your app, Consumer Key." },
      { name: "consumer_secret", label: "Consumer secret", secret: true, help: "Daraja portal: My Apps, open your app, Consumer Secret." },
      {
        name: "passkey",
        label: "Passkey",
        secret: true,
        help: "The Lipa Na M-Pesa Online passkey. Sandbox: on the Daraja portal's test credentials page. Production: e-mailed by Safaricom when your app goes live.",
      },
      {
        name: "initiator_name",
        label: "B2C initiator name (payouts, optional)",
        optional: true,
        help: "An API operator of your organisation, created in the M-Pesa Org Portal (sandbox: the Daraja portal's test credentials page).",
      },
      { name: "initiator_password", label: "B2C initiator password (optional)", secret: true, optional: true, help: "That API operator's password, from the same place." },
      { name: "c2b", label: "Payers also pay from the M-Pesa menu (C2B)", options: ["yes", "no"], boolean: true, help: "Payments made to your paybill or till from the M-Pesa menu are recorded too." },
    ],
  },
};

export function Channels({ session }: { session: Session }) {
  const writable = canWrite(session);
  const { data, error, loading, reload } = useQuery(LIST);
  const action = useAction();
  const [adding, setAdding] = useState(false);
  const [editing, setEditing] = useState<{ id: number; part: "settings" | "credentials" } | null>(null);
  const currency = data?.viewer.defaultCurrency ?? "KES";
  const edited = editing ? data?.paymentChannels.find((channel) => channel.databaseId === editing.id) : undefined;
  const closeEditor = () => setEditing(null);
  const saved = () => {
    setEditing(null);
    void reload();
  };
  const change = (write: (id: number) => Promise<unknown>, channel: Channel, done: string) =>
    action.run(async () => {
      await write(channel.databaseId);
      announce(`${channel.name}: ${done}`);
      await reload();
    });
  return (
    <section>
      <PageHeader title="Payment channels">
        {writable && !adding && (
          <button type="button" onClick={() => setAdding(true)}>
            New channel
          </button>
        )}
      </PageHeader>
      {writable && adding && (
        <NewChannel
          mode={session.mode}
          currency={currency}
          onCancel={() => setAdding(false)}
          onCreated={() => {
            setAdding(false);
            void reload();
          }}
        />
      )}
      {writable && edited && editing?.part === "settings" && <EditChannel key={edited.databaseId} channel={edited} currency={currency} onCancel={closeEditor} onSaved={saved} />}
      {writable && edited && editing?.part === "credentials" && <ReplaceCredentials key={edited.databaseId} channel={edited} onCancel={closeEditor} onSaved={saved} />}
      <h2>Channels</h2>
      <Listing
        items={data?.paymentChannels}
        loading={loading}
        error={error ?? action.error}
        empty={
          <EmptyState title="No payment channels">
            {session.mode === "live" ? (
              <p>
                A channel connects the gateway to a provider. Add a live channel (New channel): M-Pesa with your production Daraja app, or Paystack with your live keys. Its
                credentials are checked with the provider as soon as you save them.
              </p>
            ) : (
              <p>A channel connects the gateway to a provider. Add a sandbox channel (New channel) to take test payments.</p>
            )}
          </EmptyState>
        }
      >
        {(channels) => (
          <Table
            label="Payment channels"
            bodyId="channels"
            rows={channels}
            rowKey="databaseId"
            columns={[
              {
                label: "Name",
                cell: (channel) => (
                  <>
                    {channel.name}
                    {channel.webhookUrl && <span class="muted block break">Webhook URL: {channel.webhookUrl}</span>}
                  </>
                ),
              },
              { label: "Provider", cell: (channel) => channel.provider },
              { label: "Fees", cell: (channel) => <span data-field="fees">{feeScheduleText(channel, currency)}</span> },
              {
                label: "State",
                cell: (channel) => (
                  <>
                    {channel.isActive ? <Badge value="active" kind="completed" /> : <Badge value="inactive" kind="neutral" />} {channel.isDefault && <Badge value="default" kind="info" />}
                  </>
                ),
              },
              {
                label: "Credentials",
                cell: (channel) =>
                  channel.credentialsCheck ? (
                    <span class="credentials-check" data-ok={String(channel.credentialsCheck.ok)}>
                      <Badge value={channel.credentialsCheck.ok ? "accepted" : "refused"} kind={channel.credentialsCheck.ok ? "completed" : "failed"} />
                      <span class="muted block break">
                        {channel.credentialsCheck.message} ({formatDate(channel.credentialsCheck.checkedAt)})
                      </span>
                    </span>
                  ) : (
                    <span class="muted">Not checked</span>
                  ),
              },
              { label: "Created", cell: (channel) => formatDate(channel.createdAt) },
            ]}
            actions={
              writable
                ? (channel) => (
                    <>
                      <button type="button" class="secondary small" aria-label={`Edit ${channel.name}`} onClick={() => (setAdding(false), setEditing({ id: channel.databaseId, part: "settings" }))}>
                        Edit
                      </button>
                      {channel.provider !== "sandbox" && (
                        <button
                          type="button"
                          class="secondary small"
                          aria-label={`Replace credentials of ${channel.name}`}
                          onClick={() => (setAdding(false), setEditing({ id: channel.databaseId, part: "credentials" }))}
                        >
                          Replace credentials
                        </button>
                      )}
                      {!channel.isActive && (
                        <button type="button" class="secondary small" disabled={action.busy} onClick={() => void change((id) => mutate(ACTIVATE, "activatePaymentChannel", { id }), channel, "activated")}>
                          Activate
                        </button>
                      )}
                      {channel.isActive && (
                        <button
                          type="button"
                          class="secondary small"
                          disabled={action.busy}
                          onClick={() => void change((id) => mutate(CHECK_CREDENTIALS, "checkChannelCredentials", { id }), channel, "credentials checked with the provider")}
                        >
                          Check credentials
                        </button>
                      )}
                      {channel.isActive && !channel.isDefault && (
                        <button type="button" class="secondary small" disabled={action.busy} onClick={() => void change((id) => mutate(SET_DEFAULT, "setDefaultPaymentChannel", { id }), channel, "now the default")}>
                          Make default
                        </button>
                      )}
                      {channel.isActive && (
                        <ConfirmButton
                          label="Deactivate"
                          question={`Deactivate ${channel.name}? Payments can no longer use it.`}
                          confirmLabel="Deactivate channel"
                          disabled={action.busy}
                          onConfirm={() => void change((id) => mutate(DEACTIVATE, "deactivatePaymentChannel", { id }), channel, "deactivated")}
                        />
                      )}
                    </>
                  )
                : undefined
            }
          />
        )}
      </Listing>
    </section>
  );
}

function NewChannel({ mode, currency, onCreated, onCancel }: { mode: Session["mode"]; currency: string; onCreated: () => void; onCancel: () => void }) {
  // The sandbox is for test mode only: live mode offers the real providers.
  const providers = Object.entries(PROVIDERS).filter(([value]) => mode === "test" || value !== "sandbox");
  const [provider, setProvider] = useState(providers[0]![0]);
  const [name, setName] = useState("");
  const [values, setValues] = useState<Record<string, string>>({});
  const providerRef = useFocusOnMount<HTMLSelectElement>();
  const fields = PROVIDERS[provider]!.fields.filter((field) => !field.when || field.when(values));
  // The provider's charges, so that fee and net are right from the first payment.
  const fees = useFeeSchedule(currency, { feePercentBps: 0, feeFixed: 0, feeCap: null });
  const create = async () => {
    const config = configOf(fields, values);
    const { feeCap, ...schedule } = fees.schedule();
    await mutate(CREATE, "createPaymentChannel", { input: { name: name.trim(), provider, config, ...schedule, ...(feeCap === null ? {} : { feeCap }) } });
    // Credentials are write-only: forget them as soon as the gateway has them.
    setValues({});
    setName("");
    announce(`Channel ${name.trim()} created`);
    onCreated();
  };
  return (
    <CardForm title="Add a channel" titleId="new-channel-title" autoComplete="off" submit="Add channel" onSubmit={create} onCancel={onCancel}>
      <div class="grid">
        <div class="field">
          <label for="channel-provider">Provider</label>
          <select id="channel-provider" ref={providerRef} value={provider} onChange={(e) => (setProvider(e.currentTarget.value), setValues({}))}>
            {providers.map(([value, { label }]) => (
              <option value={value} key={value}>
                {label}
              </option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="channel-name">Name</label>
          <input id="channel-name" type="text" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </div>
        <CredentialFields provider={provider} fields={fields} values={values} onChange={setValues} />
      </div>
      {fields.some((field) => field.secret) && <p class="muted">Credentials are stored encrypted and never shown again.</p>}
      <FeeScheduleFields ids="channel" fees={fees} />
    </CardForm>
  );
}

/** A provider's credentials as its config takes them: options as chosen (the first by default), booleans as such, blanks left out. */
function configOf(fields: CredentialField[], values: Record<string, string>): Record<string, string | boolean> {
  const config: Record<string, string | boolean> = {};
  for (const field of fields) {
    const value = (values[field.name] ?? field.options?.[0] ?? "").trim();
    if (field.boolean) config[field.name] = value === field.options?.[0];
    else if (value) config[field.name] = value;
  }
  return config;
}

/** The inputs of a provider's credentials, each with where its value is found; always empty to start with. */
function CredentialFields({ provider, fields, values, onChange }: { provider: string; fields: CredentialField[]; values: Record<string, string>; onChange: (values: Record<string, string>) => void }) {
  return (
    <>
      {fields.map((field) => {
        const id = `channel-${field.name}`;
        const help = field.help ? `${id}-help` : undefined;
        return (
          <div class="field" key={`${provider}-${field.name}`}>
            <label for={id}>{field.label}</label>
            {field.options ? (
              <select id={id} aria-describedby={help} value={values[field.name] ?? field.options[0]} onChange={(e) => onChange({ ...values, [field.name]: e.currentTarget.value })}>
                {field.options.map((option) => (
                  <option key={option}>{option}</option>
                ))}
              </select>
            ) : (
              <input
                id={id}
                aria-describedby={help}
                {...(field.secret ? { type: "password", autoComplete: "new-password" } : { type: "text", autoComplete: "off" })}
                required={!field.optional}
                value={values[field.name] ?? ""}
                onInput={(e) => onChange({ ...values, [field.name]: e.currentTarget.value })}
              />
            )}
            {help && (
              <p class="muted help" id={help}>
                {field.help}
              </p>
            )}
          </div>
        );
      })}
    </>
  );
}

/** The example payment the fee preview is shown on, in minor units (KES 1,000.00). */
const PREVIEW_AMOUNT = 100_000;

type FeeInputs = { feePercentBps: number; feeFixed: number; feeCap: number | null } | { problem: string };

function feeInputs(percent: string, fixed: string, cap: string, currency: string): FeeInputs {
  const feePercentBps = percentToBps(percent || "0");
  if (feePercentBps === null) return { problem: "The percentage is a number from 0 to 100 with at most two decimals (1.5 for 1.5 %)." };
  const feeFixed = parseMajorUnits(fixed || "0", currency);
  if (feeFixed === null) return { problem: `The fixed fee is an amount in ${currency}, such as 10 or 10.00.` };
  const feeCap = cap.trim() ? parseMajorUnits(cap, currency) : null;
  if (cap.trim() && feeCap === null) return { problem: `The cap is an amount in ${currency}, or empty for none.` };
  return { feePercentBps, feeFixed, feeCap };
}

/**
 * A fee schedule being typed, with its preview. The preview asks the gateway (feePreview), which computes the fee as it
 * will for each payment that completes from now on; payments already made keep theirs.
 */
function useFeeSchedule(currency: string, initial: { feePercentBps: number; feeFixed: number; feeCap: number | null }) {
  const [percent, setPercent] = useState(bpsToPercent(initial.feePercentBps));
  const [fixed, setFixed] = useState(majorUnits(initial.feeFixed, currency));
  const [cap, setCap] = useState(initial.feeCap === null ? "" : majorUnits(initial.feeCap, currency));
  const [preview, setPreview] = useState<string>("");
  const inputs = feeInputs(percent, fixed, cap, currency);
  const key = JSON.stringify(inputs);
  useEffect(() => {
    if ("problem" in inputs) return setPreview(inputs.problem);
    let current = true;
    // After a pause in typing: one question per schedule, not per key stroke.
    const timer = setTimeout(() => {
      gql(FEE_PREVIEW, { amount: PREVIEW_AMOUNT, ...inputs })
        .then(({ feePreview: p }) => {
          if (!current) return;
          if (p.__typename !== "FeePreview") return setPreview(p.message);
          setPreview(`On ${formatMoney(PREVIEW_AMOUNT, currency)} you pay ${formatMoney(p.fee, currency)} in fees and keep ${formatMoney(p.net, currency)}.`);
        })
        .catch((error: unknown) => current && setPreview(errorMessage(error)));
    }, 250);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [key]);
  /** The schedule as the mutations take it; throws the problem with what was typed. */
  const schedule = () => {
    if ("problem" in inputs) throw new Error(inputs.problem);
    return inputs;
  };
  return { currency, percent, setPercent, fixed, setFixed, cap, setCap, preview, schedule };
}

/** The fee schedule's three fields (ids `<ids>-percent`, `-fixed`, `-cap`) and its preview. */
function FeeScheduleFields({ ids, fees }: { ids: string; fees: ReturnType<typeof useFeeSchedule> }) {
  const { currency } = fees;
  const previewId = `${ids}-fee-preview`;
  return (
    <>
      <div class="grid">
        <div class="field">
          <label for={`${ids}-percent`}>Fee, percent of each payment</label>
          <input id={`${ids}-percent`} type="text" inputMode="decimal" value={fees.percent} onInput={(e) => fees.setPercent(e.currentTarget.value)} aria-describedby={previewId} />
        </div>
        <div class="field">
          <label for={`${ids}-fixed`}>Fixed fee per payment ({currency})</label>
          <input id={`${ids}-fixed`} type="text" inputMode="decimal" value={fees.fixed} onInput={(e) => fees.setFixed(e.currentTarget.value)} aria-describedby={previewId} />
        </div>
        <div class="field">
          <label for={`${ids}-cap`}>Most a fee can be ({currency}; empty: no cap)</label>
          <input id={`${ids}-cap`} type="text" inputMode="decimal" value={fees.cap} onInput={(e) => fees.setCap(e.currentTarget.value)} aria-describedby={previewId} />
        </div>
      </div>
      <p id={previewId} class="fee-preview" role="status" aria-live="polite">
        {fees.preview}
      </p>
      <p class="muted">What your provider charges: payments that complete from now on are charged this; payments already made keep their fees.</p>
    </>
  );
}

/** A channel's name and fee schedule. */
function EditChannel({ channel, currency, onSaved, onCancel }: { channel: Channel; currency: string; onSaved: () => void; onCancel: () => void }) {
  const [name, setName] = useState(channel.name);
  const fees = useFeeSchedule(currency, channel);
  const nameRef = useFocusOnMount<HTMLInputElement>();
  const save = async () => {
    const { feeCap, ...schedule } = fees.schedule();
    await mutate(UPDATE, "updatePaymentChannel", {
      input: { id: channel.databaseId, name: name.trim(), ...schedule, ...(feeCap === null ? { removeFeeCap: true } : { feeCap }) },
    });
    announce(`${name.trim()}: saved`);
    onSaved();
  };
  return (
    <CardForm title={`Edit ${channel.name}`} titleId="edit-channel-title" id="edit-channel" autoComplete="off" submit="Save channel" onSubmit={save} onCancel={onCancel}>
      <div class="grid">
        <div class="field">
          <label for="edit-channel-name">Name</label>
          <input id="edit-channel-name" ref={nameRef} type="text" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </div>
      </div>
      <FeeScheduleFields ids="edit-channel" fees={fees} />
    </CardForm>
  );
}

/** New credentials for a channel: the current ones are never shown, so the whole set is entered again. */
function ReplaceCredentials({ channel, onSaved, onCancel }: { channel: Channel; onSaved: () => void; onCancel: () => void }) {
  const [values, setValues] = useState<Record<string, string>>({});
  const fields = (PROVIDERS[channel.provider]?.fields ?? []).filter((field) => !field.when || field.when(values));
  const save = async () => {
    await mutate(UPDATE, "updatePaymentChannel", { input: { id: channel.databaseId, config: configOf(fields, values) } });
    setValues({});
    announce(`${channel.name}: credentials replaced`);
    onSaved();
  };
  return (
    <CardForm title={`Replace the credentials of ${channel.name}`} titleId="replace-credentials-title" id="replace-credentials" autoComplete="off" submit="Replace credentials" onSubmit={save} onCancel={onCancel}>
      <p class="muted">The current credentials are never shown. Enter the whole set: it replaces the old one{channel.provider === "mpesa" ? " (docs/mpesa.md, Getting Daraja credentials, says more)" : ""}.</p>
      <div class="grid">
        <CredentialFields provider={channel.provider} fields={fields} values={values} onChange={setValues} />
      </div>
      {channel.isActive && <p class="muted">They are shown to the provider when saved (live channels), or with Check credentials.</p>}
    </CardForm>
  );
}
