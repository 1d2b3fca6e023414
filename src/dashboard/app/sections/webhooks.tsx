import { useState } from "preact/hooks";
import { mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardWebhookDeliveryFragment, DashboardWebhookEndpointFragment } from "../gql/graphql.ts";
import { formatDate } from "../format.ts";
import { CardForm, useFocusOnMount } from "../forms.tsx";
import { webhookEventTypes } from "../../../modules/webhooks/event-types.ts";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, ConfirmButton, EmptyState, ErrorNote, PageHeader, SecretOnce, announce, useAction, useQuery } from "../ui.tsx";

graphql(`fragment DashboardWebhookEndpoint on WebhookEndpoint { databaseId url description events enabled disabledReason createdAt }`);
graphql(`
  fragment DashboardWebhookDelivery on WebhookDelivery {
    id eventId eventType status attempts lastStatusCode lastError createdAt deliveredAt endpoint { databaseId url }
    request { url headers { name value } body }
    response { status headers { name value } body }
  }
`);
type Endpoint = DashboardWebhookEndpointFragment;
export type Delivery = DashboardWebhookDeliveryFragment;

const ENDPOINTS = graphql(`query DashboardWebhookEndpoints { webhookEndpoints { ...DashboardWebhookEndpoint } }`);
const DELIVERIES = graphql(`
  query DashboardWebhookDeliveries($eventId: ID, $limit: Int) { webhookDeliveries(eventId: $eventId, limit: $limit) { ...DashboardWebhookDelivery } }
`);
const CREATE = graphql(`
  mutation DashboardCreateWebhookEndpoint($input: CreateWebhookEndpointInput!) {
    createWebhookEndpoint(input: $input) { __typename ...DashboardError ... on WebhookEndpointWithSecret { secret endpoint { ...DashboardWebhookEndpoint } } }
  }
`);
const DELETE = graphql(`
  mutation DashboardDeleteWebhookEndpoint($id: Int!) { deleteWebhookEndpoint(id: $id) { __typename ...DashboardError ... on WebhookEndpoint { databaseId } } }
`);
const SEND_TEST = graphql(`
  mutation DashboardSendTestWebhook($endpointId: Int!) { sendTestWebhook(endpointId: $endpointId) { __typename ...DashboardError ... on WebhookDelivery { id } } }
`);
const RESEND = graphql(`
  mutation DashboardResendEvent($eventId: ID!, $endpointId: Int) {
    resendEvent(eventId: $eventId, endpointId: $endpointId) { __typename ...DashboardError ... on ResendEventPayload { deliveries { id } } }
  }
`);

export function Webhooks({ session }: { session: Session }) {
  const writable = canWrite(session);
  const endpoints = useQuery(ENDPOINTS);
  const deliveries = useQuery(DELIVERIES, { limit: 25 });
  const [secret, setSecret] = useState<string | null>(null);
  const [adding, setAdding] = useState(false);
  const remove = useAction();
  const test = useAction();

  // The test event goes through the delivery job: the list is reloaded now (pending) and once more when it has had its attempt.
  const sendTest = (endpoint: Endpoint) =>
    test.run(async () => {
      await mutate(SEND_TEST, "sendTestWebhook", { endpointId: endpoint.databaseId });
      announce(`Test event sent to ${endpoint.url}`);
      await deliveries.reload();
      setTimeout(() => void deliveries.reload(), 2000);
    });

  const deleteEndpoint = (endpoint: Endpoint) =>
    remove.run(async () => {
      await mutate(DELETE, "deleteWebhookEndpoint", { id: endpoint.databaseId });
      announce(`Endpoint ${endpoint.url} deleted`);
      await Promise.all([endpoints.reload(), deliveries.reload()]);
    });

  return (
    <section>
      <PageHeader title="Webhooks">
        {writable && !adding && (
          <button type="button" onClick={() => setAdding(true)}>
            New endpoint
          </button>
        )}
      </PageHeader>
      {secret && <SecretOnce label="Signing secret of the new endpoint" secret={secret} onDone={() => setSecret(null)} />}
      {writable && adding && (
        <NewEndpoint
          testMode={session.mode === "test"}
          onCancel={() => setAdding(false)}
          onCreated={(newSecret) => {
            setAdding(false);
            setSecret(newSecret);
            void endpoints.reload();
          }}
        />
      )}
      <h2>Endpoints</h2>
      <Listing
        items={endpoints.data?.webhookEndpoints}
        loading={endpoints.loading}
        error={endpoints.error ?? remove.error ?? test.error}
        empty={<EmptyState title="No webhook endpoints">{writable && <p>Add an endpoint (New endpoint) to receive signed events when payments complete or fail.</p>}</EmptyState>}
      >
        {(list) => (
          <Table
            label="Webhook endpoints"
            bodyId="webhook-endpoints"
            rows={list}
            rowKey="databaseId"
            columns={[
              { label: "URL", class: "break", cell: (endpoint) => endpoint.url, note: (endpoint) => endpoint.description },
              { label: "Events", cell: (endpoint) => (endpoint.events.length ? endpoint.events.join(", ") : "All events") },
              {
                label: "State",
                cell: (endpoint) => (endpoint.enabled ? <Badge value="enabled" kind="completed" /> : <Badge value="disabled" kind="failed" />),
                note: (endpoint) => endpoint.disabledReason,
              },
              { label: "Created", cell: (endpoint) => formatDate(endpoint.createdAt) },
            ]}
            actions={
              writable
                ? (endpoint) => (
                    <div class="row">
                      <button type="button" class="secondary small" disabled={test.busy} aria-label={`Send test event to ${endpoint.url}`} onClick={() => void sendTest(endpoint)}>
                        Send test event
                      </button>
                      <ConfirmButton label="Delete" question={`Delete ${endpoint.url} and its delivery history?`} confirmLabel="Delete endpoint" disabled={remove.busy} onConfirm={() => void deleteEndpoint(endpoint)} />
                    </div>
                  )
                : undefined
            }
          />
        )}
      </Listing>
      <div class="subheader">
        <h2>Recent deliveries</h2>
        <button type="button" class="secondary small" onClick={() => void deliveries.reload()}>
          Refresh
        </button>
      </div>
      <ErrorNote message={deliveries.error} />
      {deliveries.data && <DeliveriesTable deliveries={deliveries.data.webhookDeliveries} writable={writable} onResent={() => void deliveries.reload()} />}
    </section>
  );
}

function NewEndpoint({ testMode, onCreated, onCancel }: { testMode: boolean; onCreated: (secret: string) => void; onCancel: () => void }) {
  const [url, setUrl] = useState("");
  const [allowLocalUrls, setAllowLocalUrls] = useState(false);
  const [description, setDescription] = useState("");
  const [events, setEvents] = useState<string[]>([]);
  const urlRef = useFocusOnMount<HTMLInputElement>();
  const create = async () => {
    const input = { url: url.trim(), events, ...(description.trim() ? { description: description.trim() } : {}), ...(testMode && allowLocalUrls ? { allowLocalUrls: true } : {}) };
    const result = await mutate(CREATE, "createWebhookEndpoint", { input });
    setUrl("");
    setDescription("");
    setEvents([]);
    setAllowLocalUrls(false);
    announce("Webhook endpoint created. Copy its signing secret now.");
    onCreated(result.secret);
  };
  const toggle = (type: string, on: boolean) => setEvents(on ? [...events, type] : events.filter((t) => t !== type));
  return (
    <CardForm title="Add an endpoint" titleId="new-endpoint-title" submit="Add endpoint" onSubmit={create} onCancel={onCancel}>
      <div class="field">
        <label for="endpoint-url">Endpoint URL</label>
        <input id="endpoint-url" ref={urlRef} type="url" required placeholder="https://example.com/webhooks" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
      </div>
      {testMode && (
        <div class="field">
          <label class="inline">
            <input id="endpoint-allow-local" type="checkbox" aria-describedby="endpoint-allow-local-hint" checked={allowLocalUrls} onChange={(e) => setAllowLocalUrls(e.currentTarget.checked)} /> Allow local
            URLs (test mode only)
          </label>
          <p id="endpoint-allow-local-hint" class="muted hint">
            For a receiver on your own machine or network, such as http://localhost:4000/webhooks. Live endpoints are always public https URLs.
          </p>
        </div>
      )}
      <div class="field">
        <label for="endpoint-description">Description (optional)</label>
        <input id="endpoint-description" type="text" maxLength={200} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </div>
      <fieldset>
        <legend>Event types</legend>
        <p class="muted hint">None selected: every type.</p>
        <div class="checks">
          {webhookEventTypes.map((type) => (
            <label class="inline" key={type}>
              <input type="checkbox" name="events" value={type} checked={events.includes(type)} onChange={(e) => toggle(type, e.currentTarget.checked)} /> {type}
            </label>
          ))}
        </div>
      </fieldset>
    </CardForm>
  );
}

/** JSON pretty-printed; anything else as it came. */
function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

const headerLines = (headers: { name: string; value: string }[]) => headers.map((h) => `${h.name}: ${h.value}`).join("\n");

/**
 * A delivery's request (as every attempt sends it, the signature withheld) and the last answer's excerpt. The
 * answer is the endpoint's untrusted text: shown as text only (Preact escapes it), never rendered.
 */
function DeliveryDetails({ delivery }: { delivery: Delivery }) {
  const { request, response } = delivery;
  return (
    <details class="delivery-details">
      <summary aria-label={`Details of ${delivery.eventType} to ${delivery.endpoint.url}`}>Details</summary>
      <p class="muted">Request: POST {request.url}</p>
      <pre class="code" tabIndex={0} data-part="request-headers">{headerLines(request.headers)}</pre>
      <pre class="code" tabIndex={0} data-part="request-body">{pretty(request.body)}</pre>
      {response ? (
        <>
          <p class="muted">Response to the last attempt: HTTP {response.status}</p>
          <pre class="code" tabIndex={0} data-part="response-headers">{headerLines(response.headers) || "(no headers kept)"}</pre>
          <pre class="code" tabIndex={0} data-part="response-body">{response.body || "(empty body)"}</pre>
        </>
      ) : (
        <p class="muted">No response {delivery.attempts === 0 ? "yet" : `to the last attempt${delivery.lastError ? `: ${delivery.lastError}` : ""}`}.</p>
      )}
    </details>
  );
}

/** Deliveries with their outcome and a Resend button (used here and on a transaction's page). */
export function DeliveriesTable({ deliveries, writable, onResent }: { deliveries: Delivery[]; writable: boolean; onResent: () => void }) {
  const resend = useAction();
  if (deliveries.length === 0) return <p class="muted">No deliveries yet.</p>;
  const resendOne = (delivery: Delivery) =>
    resend.run(async () => {
      await mutate(RESEND, "resendEvent", { eventId: delivery.eventId, endpointId: delivery.endpoint.databaseId });
      announce(`Event ${delivery.eventType} queued for delivery again`);
      onResent();
    });
  return (
    <>
      <ErrorNote message={resend.error} />
      <Table
        label="Webhook deliveries"
        rows={deliveries}
        rowKey="id"
        columns={[
          { label: "Event", cell: (delivery) => delivery.eventType, note: (delivery) => `event ${delivery.eventId}` },
          { label: "Endpoint", class: "break", cell: (delivery) => delivery.endpoint.url },
          {
            label: "Status",
            cell: (delivery) => <Badge value={delivery.status} kind={delivery.status === "succeeded" ? "completed" : delivery.status} />,
            note: (delivery) => delivery.lastError,
          },
          { label: "Response", num: true, cell: (delivery) => delivery.lastStatusCode ?? "—" },
          { label: "Attempts", num: true, cell: (delivery) => delivery.attempts },
          { label: "Created", cell: (delivery) => formatDate(delivery.createdAt) },
          { label: "Request and response", cell: (delivery) => <DeliveryDetails delivery={delivery} /> },
        ]}
        actions={
          writable
            ? (delivery) => (
                <button type="button" class="secondary small" disabled={resend.busy} onClick={() => void resendOne(delivery)} aria-label={`Resend ${delivery.eventType} to ${delivery.endpoint.url}`}>
                  Resend
                </button>
              )
            : undefined
        }
      />
    </>
  );
}

export { DELIVERIES };
