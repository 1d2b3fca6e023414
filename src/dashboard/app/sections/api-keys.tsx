import { useState } from "preact/hooks";
import { ERROR_FIELDS, mutate } from "../api.ts";
import { formatDate } from "../format.ts";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, ConfirmButton, EmptyState, PageHeader, SecretOnce, announce, useAction, useQuery } from "../ui.tsx";

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
      const created = await mutate<{ __typename: "CreatedApiKey"; secret: string }>(CREATE, "createApiKey");
      setSecret(created.secret);
      announce("API key created. Copy it now: it is shown only once.");
      await reload();
    });
  const revoke = (key: ApiKey) =>
    action.run(async () => {
      await mutate(REVOKE, "revokeApiKey", { prefix: key.prefix });
      announce(`Key ${key.prefix} revoked`);
      await reload();
    });

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
      <Listing items={data?.apiKeys} loading={loading} error={error ?? action.error} empty={<EmptyState title={`No ${session.mode} keys`} />}>
        {(keys) => (
          <Table
            label="API keys"
            bodyId="api-keys"
            rows={keys}
            rowKey="databaseId"
            rowProps={(key) => ({ "data-prefix": key.prefix })}
            columns={[
              { label: "Key", class: "mono", cell: (key) => `${key.prefix}…` },
              { label: "State", cell: (key) => (key.revokedAt ? <Badge value={`revoked ${formatDate(key.revokedAt)}`} kind="failed" /> : <Badge value="active" kind="completed" />) },
              { label: "Created", cell: (key) => formatDate(key.createdAt) },
            ]}
            actions={
              writable
                ? (key) =>
                    !key.revokedAt && (
                      <ConfirmButton
                        label="Revoke"
                        question={`Revoke ${key.prefix}…? Requests with it fail at once.`}
                        confirmLabel="Revoke key"
                        disabled={action.busy}
                        onConfirm={() => void revoke(key)}
                      />
                    )
                : undefined
            }
          />
        )}
      </Listing>
    </section>
  );
}
