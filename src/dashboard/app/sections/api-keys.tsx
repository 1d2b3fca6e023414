import { useState } from "preact/hooks";
import { mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardApiKeyFragment, UserRole } from "../gql/graphql.ts";
import { formatDate } from "../format.ts";
import { canWrite, type Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, ConfirmButton, EmptyState, PageHeader, SecretOnce, announce, useAction, useQuery } from "../ui.tsx";

graphql(`fragment DashboardApiKey on ApiKey { databaseId prefix mode role createdAt revokedAt }`);
type ApiKey = DashboardApiKeyFragment;
const LIST = graphql(`query DashboardApiKeys { apiKeys { ...DashboardApiKey } }`);
const CREATE = graphql(`
  mutation DashboardCreateApiKey($role: UserRole!) { createApiKey(role: $role) { __typename ...DashboardError ... on CreatedApiKey { secret apiKey { ...DashboardApiKey } } } }
`);

type Role = UserRole;
/** What a key of each role may do (the README's authorization table), as the page explains it. */
const ROLE_HINTS: Record<Role, string> = {
  owner: "everything in this mode, payouts included",
  developer: "reads, and writes in test mode only",
  viewer: "reads only",
};
/** The roles a user may give a key: at most their own. */
const rolesUpTo = (role: Role): Role[] => (["owner", "developer", "viewer"] as Role[]).slice(["owner", "developer", "viewer"].indexOf(role));
const REVOKE = graphql(`
  mutation DashboardRevokeApiKey($prefix: String!) { revokeApiKey(prefix: $prefix) { __typename ...DashboardError ... on ApiKey { ...DashboardApiKey } } }
`);

export function ApiKeys({ session }: { session: Session }) {
  const writable = canWrite(session);
  const { data, error, loading, reload } = useQuery(LIST);
  const [secret, setSecret] = useState<string | null>(null);
  const roles = rolesUpTo(session.user.role as Role);
  const [role, setRole] = useState<Role>(roles[0]!);
  const action = useAction();

  const create = () =>
    action.run(async () => {
      const created = await mutate(CREATE, "createApiKey", { role });
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
