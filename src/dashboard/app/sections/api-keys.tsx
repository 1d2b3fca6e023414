import { useState } from "preact/hooks";
import { ERROR_FIELDS, mutate } from "../api.ts";
import { formatDate } from "../format.ts";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, ConfirmButton, EmptyState, PageHeader, SecretOnce, announce, useAction, useQuery } from "../ui.tsx";

const FIELDS = "databaseId prefix mode role createdAt revokedAt";
const LIST = `query DashboardApiKeys { apiKeys { ${FIELDS} } }`;
const CREATE = `mutation DashboardCreateApiKey($role: UserRole!) { createApiKey(role: $role) { ${ERROR_FIELDS} ... on CreatedApiKey { secret apiKey { ${FIELDS} } } } }`;

type Role = "owner" | "developer" | "viewer";
/** What a key of each role may do (the README's authorization table), as the page explains it. */
const ROLE_HINTS: Record<Role, string> = {
  owner: "everything in this mode, payouts included",
  developer: "reads, and writes in test mode only",
  viewer: "reads only",
};
/** The roles a user may give a key: at most their own. */
const rolesUpTo = (role: Role): Role[] => (["owner", "developer", "viewer"] as Role[]).slice(["owner", "developer", "viewer"].indexOf(role));
const REVOKE = `mutation DashboardRevokeApiKey($prefix: String!) { revokeApiKey(prefix: $prefix) { ${ERROR_FIELDS} ... on ApiKey { ${FIELDS} } } }`;

interface ApiKey {
  databaseId: number;
  prefix: string;
  mode: string;
  role: Role;
  createdAt: string;
  revokedAt: string | null;
}

export function ApiKeys({ session }: { session: Session }) {
  const writable = canWrite(session);
  const { data, error, loading, reload } = useQuery<{ apiKeys: ApiKey[] }>(LIST);
  const [secret, setSecret] = useState<string | null>(null);
  const roles = rolesUpTo(session.user.role as Role);
  const [role, setRole] = useState<Role>(roles[0]!);
  const action = useAction();

  const create = () =>
    action.run(async () => {
      const created = await mutate<{ __typename: "CreatedApiKey"; secret: string }>(CREATE, "createApiKey", { role });
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
          <span class="inline-form">
            <label>
              Role{" "}
              <select name="role" value={role} onChange={(event) => setRole((event.currentTarget as HTMLSelectElement).value as Role)}>
                {roles.map((r) => (
                  <option value={r}>{r}</option>
                ))}
              </select>
            </label>{" "}
            <button type="button" disabled={action.busy} onClick={() => void create()}>
              Create {session.mode} key
            </button>
          </span>
        )}
      </PageHeader>
      <p class="muted">
        Secret keys belong on your server, never in a browser or an app. Keys of the other mode are listed when you switch mode. A key acts only
        in its mode, with its role ({role}: {ROLE_HINTS[role]}); no key can manage keys, the team or the brand.
      </p>
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
              { label: "Role", cell: (key) => key.role },
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
