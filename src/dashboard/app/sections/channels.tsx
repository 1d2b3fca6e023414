import { useState } from "preact/hooks";
import { mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardChannelsQuery } from "../gql/graphql.ts";
import { formatDate } from "../format.ts";
import { CardForm, useFocusOnMount } from "../forms.tsx";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, ConfirmButton, EmptyState, PageHeader, announce, useAction, useQuery } from "../ui.tsx";

const LIST = graphql(`
  query DashboardChannels { paymentChannels { databaseId name provider isActive isDefault webhookUrl createdAt credentialsCheck { ok message checkedAt } } }
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
  when?: (values: Record<string, string>) => boolean;
}
const PROVIDERS: Record<string, { label: string; fields: CredentialField[] }> = {
  sandbox: { label: "Sandbox (test cards and simulated M-Pesa)", fields: [] },
  paystack: {
    label: "Paystack",
    fields: [
      { name: "public_key", label: "Public key (pk_test_… or pk_live_…)" },
      { name: "secret_key", label: "Secret key (sk_test_… or sk_live_…)", secret: true },
    ],
  },
  mpesa: {
    label: "M-Pesa (Daraja)",
    fields: [
      { name: "environment", label: "Daraja environment", options: ["sandbox", "production"] },
      { name: "transaction_type", label: "Account type", options: ["paybill", "till"] },
      { name: "shortcode", label: "Shortcode" },
      { name: "till_number", label: "Till number", when: (v) => v.transaction_type === "till" },
      { name: "consumer_key", label: "Consumer key", secret: true },
      { name: "consumer_secret", label: "Consumer secret", secret: true },
      { name: "passkey", label: "Passkey", secret: true },
      { name: "initiator_name", label: "B2C initiator name (payouts, optional)", optional: true },
      { name: "initiator_password", label: "B2C initiator password (optional)", secret: true, optional: true },
      { name: "c2b", label: "Payers also pay from the M-Pesa menu (C2B)", options: ["yes", "no"], boolean: true },
    ],
  },
};

export function Channels({ session }: { session: Session }) {
  const writable = canWrite(session);
  const { data, error, loading, reload } = useQuery(LIST);
  const action = useAction();
  const [adding, setAdding] = useState(false);
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
          onCancel={() => setAdding(false)}
          onCreated={() => {
            setAdding(false);
            void reload();
          }}
        />
      )}
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

function NewChannel({ mode, onCreated, onCancel }: { mode: Session["mode"]; onCreated: () => void; onCancel: () => void }) {
  // The sandbox is for test mode only: live mode offers the real providers.
  const providers = Object.entries(PROVIDERS).filter(([value]) => mode === "test" || value !== "sandbox");
  const [provider, setProvider] = useState(providers[0]![0]);
  const [name, setName] = useState("");
  const [values, setValues] = useState<Record<string, string>>({});
  const providerRef = useFocusOnMount<HTMLSelectElement>();
  const fields = PROVIDERS[provider]!.fields.filter((field) => !field.when || field.when(values));
  const create = async () => {
    const config: Record<string, string | boolean> = {};
    for (const field of fields) {
      const value = (values[field.name] ?? field.options?.[0] ?? "").trim();
      if (field.boolean) config[field.name] = value === field.options?.[0];
      else if (value) config[field.name] = value;
    }
    await mutate(CREATE, "createPaymentChannel", { input: { name: name.trim(), provider, config } });
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
        {fields.map((field) => (
          <div class="field" key={`${provider}-${field.name}`}>
            <label for={`channel-${field.name}`}>{field.label}</label>
            {field.options ? (
              <select id={`channel-${field.name}`} value={values[field.name] ?? field.options[0]} onChange={(e) => setValues({ ...values, [field.name]: e.currentTarget.value })}>
                {field.options.map((option) => (
                  <option key={option}>{option}</option>
                ))}
              </select>
            ) : (
              <input
                id={`channel-${field.name}`}
                {...(field.secret ? { type: "password", autoComplete: "new-password" } : { type: "text", autoComplete: "off" })}
                required={!field.optional}
                value={values[field.name] ?? ""}
                onInput={(e) => setValues({ ...values, [field.name]: e.currentTarget.value })}
              />
            )}
          </div>
        ))}
      </div>
      {fields.some((field) => field.secret) && <p class="muted">Credentials are stored encrypted and never shown again.</p>}
    </CardForm>
  );
}
