import { useState } from "preact/hooks";
import { ERROR_FIELDS, expectOk, gql, type Result } from "../api.ts";
import { formatDate } from "../format.ts";
import { canWrite, type Session } from "../session.ts";
import { Badge, ConfirmButton, EmptyState, ErrorNote, Loading, PageHeader, SecretOnce, TableWrap, announce, useAction, useQuery } from "../ui.tsx";

const FIELDS = "databaseId prefix mode createdAt revokedAt";
const LIST = `query DashboardApiKeys { apiKeys { ${FIELDS} } }`;
const CREATE = `mutation DashboardCreateApiKey { createApiKey { ${ERROR_FIELDS} ... on CreatedApiKey { secret apiKey { ${FIELDS} } } } }`;
const REVOKE = `mutation DashboardRevokeApiKey($prefix: String!) { revokeApiKey(prefix: $prefix) { ${ERROR_FIELDS} ... on ApiKey { ${FIELDS} } } }`;

interface ApiKey {
  databaseId: number;
  prefix: string;
  mode: string;
  createdAt: string;
  revokedAt: string | null;
}

export function ApiKeys({ session }: { session: Session }) {
  const writable = canWrite(session);
  const { data, error, loading, reload } = useQuery<{ apiKeys: ApiKey[] }>(LIST);
  const [secret, setSecret] = useState<string | null>(null);
  const action = useAction();

  const create = () =>
    action.run(async () => {
      const created = expectOk((await gql<{ createApiKey: Result<{ __typename: "CreatedApiKey"; secret: string }> }>(CREATE)).createApiKey);
      setSecret(created.secret);
      announce("API key created. Copy it now: it is shown only once.");
      await reload();
    });
  const revoke = (key: ApiKey) =>
    action.run(async () => {
      expectOk((await gql<{ revokeApiKey: Result<{ __typename: "ApiKey" }> }>(REVOKE, { prefix: key.prefix })).revokeApiKey);
      announce(`Key ${key.prefix} revoked`);
      await reload();
    });

  const keys = data?.apiKeys;
  return (
    <section>
      <PageHeader title={`API keys (${session.mode} mode)`}>
        {writable && (
          <button type="button" disabled={action.busy} onClick={() => void create()}>
            Create {session.mode} key
          </button>
        )}
      </PageHeader>
      <p class="muted">Secret keys belong on your server, never in a browser or an app. Keys of the other mode are listed when you switch mode.</p>
      {secret && <SecretOnce label="Your new API key" secret={secret} onDone={() => setSecret(null)} />}
      <ErrorNote message={error ?? action.error} />
      {!keys && loading && <Loading />}
      {keys && keys.length === 0 && <EmptyState title={`No ${session.mode} keys`} />}
      {keys && keys.length > 0 && (
        <TableWrap label="API keys">
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">State</th>
              <th scope="col">Created</th>
              {writable && (
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              )}
            </tr>
          </thead>
          <tbody id="api-keys">
            {keys.map((key) => (
              <tr key={key.databaseId} data-prefix={key.prefix}>
                <th scope="row" data-label="Key" class="mono">
                  {key.prefix}…
                </th>
                <td data-label="State">{key.revokedAt ? <Badge value={`revoked ${formatDate(key.revokedAt)}`} kind="failed" /> : <Badge value="active" kind="completed" />}</td>
                <td data-label="Created">{formatDate(key.createdAt)}</td>
                {writable && (
                  <td class="actions">
                    {!key.revokedAt && (
                      <ConfirmButton
                        label="Revoke"
                        question={`Revoke ${key.prefix}…? Requests with it fail at once.`}
                        confirmLabel="Revoke key"
                        disabled={action.busy}
                        onConfirm={() => void revoke(key)}
                      />
                    )}
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </TableWrap>
      )}
    </section>
  );
}
