import { useEffect, useRef, useState } from "preact/hooks";
import { ERROR_FIELDS, expectOk, gql, type Result } from "../api.ts";
import { formatDate } from "../format.ts";
import { canWrite, type Session } from "../session.ts";
import { Badge, ConfirmButton, EmptyState, ErrorNote, Loading, PageHeader, SecretOnce, TableWrap, announce, useAction, useQuery } from "../ui.tsx";

const EVENT_TYPES = ["transaction.pending", "transaction.completed", "transaction.failed", "payout.completed", "payout.failed"];
const ENDPOINT_FIELDS = "databaseId url description events enabled disabledReason createdAt";
const DELIVERY_FIELDS = "id eventId eventType status attempts lastStatusCode lastError createdAt deliveredAt endpoint { databaseId url }";

const ENDPOINTS = `query DashboardWebhookEndpoints { webhookEndpoints { ${ENDPOINT_FIELDS} } }`;
const DELIVERIES = `query DashboardWebhookDeliveries($eventId: ID, $limit: Int) { webhookDeliveries(eventId: $eventId, limit: $limit) { ${DELIVERY_FIELDS} } }`;
const CREATE = `mutation DashboardCreateWebhookEndpoint($input: CreateWebhookEndpointInput!) {
  createWebhookEndpoint(input: $input) { ${ERROR_FIELDS} ... on WebhookEndpointWithSecret { secret endpoint { ${ENDPOINT_FIELDS} } } }
}`;
const DELETE = `mutation DashboardDeleteWebhookEndpoint($id: Int!) { deleteWebhookEndpoint(id: $id) { ${ERROR_FIELDS} ... on WebhookEndpoint { databaseId } } }`;
const RESEND = `mutation DashboardResendEvent($eventId: ID!, $endpointId: Int) {
  resendEvent(eventId: $eventId, endpointId: $endpointId) { ${ERROR_FIELDS} ... on ResendEventPayload { deliveries { id } } }
}`;

interface Endpoint {
  databaseId: number;
  url: string;
  description: string | null;
  events: string[];
  enabled: boolean;
  disabledReason: string | null;
  createdAt: string;
}
export interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  status: "pending" | "succeeded" | "failed";
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  deliveredAt: string | null;
  endpoint: { databaseId: number; url: string };
}

export function Webhooks({ session }: { session: Session }) {
  const writable = canWrite(session);
  const endpoints = useQuery<{ webhookEndpoints: Endpoint[] }>(ENDPOINTS);
  const deliveries = useQuery<{ webhookDeliveries: Delivery[] }>(DELIVERIES, { limit: 25 });
  const [secret, setSecret] = useState<string | null>(null);
  const [adding, setAdding] = useState(false);
  const remove = useAction();

  const deleteEndpoint = (endpoint: Endpoint) =>
    remove.run(async () => {
      expectOk((await gql<{ deleteWebhookEndpoint: Result<{ __typename: "WebhookEndpoint" }> }>(DELETE, { id: endpoint.databaseId })).deleteWebhookEndpoint);
      announce(`Endpoint ${endpoint.url} deleted`);
      await Promise.all([endpoints.reload(), deliveries.reload()]);
    });

  const list = endpoints.data?.webhookEndpoints;
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
          onCancel={() => setAdding(false)}
          onCreated={(newSecret) => {
            setAdding(false);
            setSecret(newSecret);
            void endpoints.reload();
          }}
        />
      )}
      <h2>Endpoints</h2>
      <ErrorNote message={endpoints.error ?? remove.error} />
      {!list && endpoints.loading && <Loading />}
      {list && list.length === 0 && <EmptyState title="No webhook endpoints">{writable && <p>Add an endpoint (New endpoint) to receive signed events when payments complete or fail.</p>}</EmptyState>}
      {list && list.length > 0 && (
        <TableWrap label="Webhook endpoints">
          <thead>
            <tr>
              <th scope="col">URL</th>
              <th scope="col">Events</th>
              <th scope="col">State</th>
              <th scope="col">Created</th>
              {writable && (
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody id="webhook-endpoints">
            {list.map((endpoint) => (
              <tr key={endpoint.databaseId}>
                <th scope="row" data-label="URL" class="break">
                  {endpoint.url}
                  {endpoint.description && <span class="muted block">{endpoint.description}</span>}
                </th>
                <td data-label="Events">{endpoint.events.length ? endpoint.events.join(", ") : "All events"}</td>
                <td data-label="State">
                  {endpoint.enabled ? <Badge value="enabled" kind="completed" /> : <Badge value="disabled" kind="failed" />}
                  {endpoint.disabledReason && <span class="muted block">{endpoint.disabledReason}</span>}
                </td>
                <td data-label="Created">{formatDate(endpoint.createdAt)}</td>
                {writable && (
                  <td class="actions">
                    <ConfirmButton label="Delete" question={`Delete ${endpoint.url} and its delivery history?`} confirmLabel="Delete endpoint" disabled={remove.busy} onConfirm={() => void deleteEndpoint(endpoint)} />
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </TableWrap>
      )}
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

function NewEndpoint({ onCreated, onCancel }: { onCreated: (secret: string) => void; onCancel: () => void }) {
  const [url, setUrl] = useState("");
  const [description, setDescription] = useState("");
  const [events, setEvents] = useState<string[]>([]);
  const create = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    void create.run(async () => {
      const input = { url: url.trim(), events, ...(description.trim() ? { description: description.trim() } : {}) };
      const result = expectOk((await gql<{ createWebhookEndpoint: Result<{ __typename: "WebhookEndpointWithSecret"; secret: string }> }>(CREATE, { input })).createWebhookEndpoint);
      setUrl("");
      setDescription("");
      setEvents([]);
      announce("Webhook endpoint created. Copy its signing secret now.");
      onCreated(result.secret);
    });
  };
  const toggle = (type: string, on: boolean) => setEvents(on ? [...events, type] : events.filter((t) => t !== type));
  const urlRef = useRef<HTMLInputElement>(null);
  useEffect(() => urlRef.current?.focus(), []);
  return (
    <form class="card form" onSubmit={submit} aria-labelledby="new-endpoint-title">
      <h2 id="new-endpoint-title">Add an endpoint</h2>
      <div class="field">
        <label for="endpoint-url">Endpoint URL</label>
        <input id="endpoint-url" ref={urlRef} type="url" required placeholder="https://example.com/webhooks" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="endpoint-description">Description (optional)</label>
        <input id="endpoint-description" type="text" maxLength={200} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </div>
      <fieldset>
        <legend>Event types</legend>
        <p class="muted hint">None selected: every type.</p>
        <div class="checks">
          {EVENT_TYPES.map((type) => (
            <label class="inline" key={type}>
              <input type="checkbox" name="events" value={type} checked={events.includes(type)} onChange={(e) => toggle(type, e.currentTarget.checked)} /> {type}
            </label>
          ))}
        </div>
      </fieldset>
      <ErrorNote message={create.error} />
      <div class="row">
        <button type="submit" disabled={create.busy}>
          Add endpoint
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** Deliveries with their outcome and a Resend button (used here and on a transaction's page). */
export function DeliveriesTable({ deliveries, writable, onResent }: { deliveries: Delivery[]; writable: boolean; onResent: () => void }) {
  const resend = useAction();
  if (deliveries.length === 0) return <p class="muted">No deliveries yet.</p>;
  const resendOne = (delivery: Delivery) =>
    resend.run(async () => {
      expectOk((await gql<{ resendEvent: Result<{ __typename: "ResendEventPayload" }> }>(RESEND, { eventId: delivery.eventId, endpointId: delivery.endpoint.databaseId })).resendEvent);
      announce(`Event ${delivery.eventType} queued for delivery again`);
      onResent();
    });
  return (
    <>
      <ErrorNote message={resend.error} />
      <TableWrap label="Webhook deliveries">
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">Endpoint</th>
            <th scope="col">Status</th>
            <th scope="col" class="num">
              Response
            </th>
            <th scope="col" class="num">
              Attempts
            </th>
            <th scope="col">Created</th>
            {writable && (
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {deliveries.map((delivery) => (
            <tr key={delivery.id}>
              <th scope="row" data-label="Event">
                {delivery.eventType}
                <span class="muted block">event {delivery.eventId}</span>
              </th>
              <td data-label="Endpoint" class="break">
                {delivery.endpoint.url}
              </td>
              <td data-label="Status">
                <Badge value={delivery.status} kind={delivery.status === "succeeded" ? "completed" : delivery.status} />
                {delivery.lastError && <span class="muted block">{delivery.lastError}</span>}
              </td>
              <td data-label="Response" class="num">
                {delivery.lastStatusCode ?? "—"}
              </td>
              <td data-label="Attempts" class="num">
                {delivery.attempts}
              </td>
              <td data-label="Created">{formatDate(delivery.createdAt)}</td>
              {writable && (
                <td class="actions">
                  <button type="button" class="secondary small" disabled={resend.busy} onClick={() => void resendOne(delivery)} aria-label={`Resend ${delivery.eventType} to ${delivery.endpoint.url}`}>
                    Resend
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </TableWrap>
    </>
  );
}

export { DELIVERIES };
