import { useState } from "preact/hooks";
import { mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardUserFragment, UserRole } from "../gql/graphql.ts";
import { formatDate } from "../format.ts";
import { CardForm } from "../forms.tsx";
import type { Session } from "../session.ts";
import { Listing, Table } from "../tables.tsx";
import { Badge, ConfirmButton, EmptyState, PageHeader, announce, useAction, useQuery } from "../ui.tsx";

graphql(`fragment DashboardUser on User { databaseId email role createdAt disabledAt }`);
type User = DashboardUserFragment;
const LIST = graphql(`query DashboardUsers { users { ...DashboardUser } }`);
const CREATE = graphql(`
  mutation DashboardCreateUser($input: CreateUserInput!) { createUser(input: $input) { __typename ...DashboardError ... on User { ...DashboardUser } } }
`);
const CHANGE_ROLE = graphql(`
  mutation DashboardChangeUserRole($input: ChangeUserRoleInput!) { changeUserRole(input: $input) { __typename ...DashboardError ... on User { ...DashboardUser } } }
`);
const DISABLE = graphql(`
  mutation DashboardDisableUser($id: Int!) { disableUser(id: $id) { __typename ...DashboardError ... on User { ...DashboardUser } } }
`);
const CHANGE_PASSWORD = graphql(`
  mutation DashboardChangePassword($input: ChangePasswordInput!) { changePassword(input: $input) { __typename ...DashboardError ... on User { databaseId } } }
`);

const ROLES = ["owner", "developer", "viewer"] as const;
const ROLE_WORDS: Record<string, string> = {
  owner: "everything: live mode, payouts, users",
  developer: "changes test-mode data, reads live",
  viewer: "reads only",
};

/** Everyone changes their own password here; an owner also sees and manages the team. */
export function Users({ session }: { session: Session }) {
  const owner = session.user.role === "owner";
  return (
    <section>
      <PageHeader title="Users" />
      {owner ? <Team session={session} /> : <p class="muted">Only an owner can see and manage the team; ask one to add people or change roles.</p>}
      <PasswordForm />
    </section>
  );
}

function Team({ session }: { session: Session }) {
  const { data, error, loading, reload } = useQuery(LIST);
  const [adding, setAdding] = useState(false);
  const action = useAction();

  const changeRole = (user: User, role: UserRole) =>
    action.run(async () => {
      await mutate(CHANGE_ROLE, "changeUserRole", { input: { id: user.databaseId, role } });
      await reload(); // announced once the table shows it, so what is read out and what is seen agree
      announce(`${user.email} is now ${role}`);
    });
  const disable = (user: User) =>
    action.run(async () => {
      await mutate(DISABLE, "disableUser", { id: user.databaseId });
      await reload();
      announce(`${user.email} is disabled and signed out`);
    });
  const self = (user: User) => user.databaseId === session.user.id;
  // Nobody changes their own role or disables themselves; a disabled user stays as they are.
  const editable = (user: User) => !self(user) && !user.disabledAt;

  return (
    <>
      <div class="subheader">
        <h2 id="team-title">Team</h2>
        {!adding && (
          <button type="button" onClick={() => setAdding(true)}>
            Add user
          </button>
        )}
      </div>
      <p class="muted">
        Roles: {ROLES.map((role) => `${role} (${ROLE_WORDS[role]})`).join("; ")}. A new role applies at once;
        disabling signs the user out.
      </p>
      {adding && (
        <NewUserForm
          onCancel={() => setAdding(false)}
          onCreated={async (user) => {
            setAdding(false);
            announce(`${user.email} added as ${user.role}`);
            await reload();
          }}
        />
      )}
      <Listing items={data?.users} loading={loading} error={error ?? action.error} empty={<EmptyState title="No users" />}>
        {(users) => (
          <Table
            label="Team"
            bodyId="users"
            rows={users}
            rowKey="databaseId"
            rowProps={(user) => ({ "data-email": user.email })}
            columns={[
              {
                label: "E-mail",
                class: "break",
                cell: (user) => (
                  <>
                    {user.email}
                    {self(user) && <span class="muted"> (you)</span>}
                  </>
                ),
              },
              {
                label: "Role",
                cell: (user) =>
                  editable(user) ? (
                    <select aria-label={`Role of ${user.email}`} value={user.role} disabled={action.busy} onChange={(e) => void changeRole(user, e.currentTarget.value as UserRole)}>
                      {ROLES.map((role) => (
                        <option key={role} value={role}>
                          {role}
                        </option>
                      ))}
                    </select>
                  ) : (
                    <span class="role">{user.role}</span>
                  ),
              },
              { label: "State", cell: (user) => (user.disabledAt ? <Badge value={`disabled ${formatDate(user.disabledAt)}`} kind="failed" /> : <Badge value="active" kind="completed" />) },
              { label: "Added", cell: (user) => formatDate(user.createdAt) },
            ]}
            actions={(user) =>
              editable(user) && (
                <ConfirmButton
                  label="Disable"
                  question={`Disable ${user.email}? They are signed out and can no longer sign in.`}
                  confirmLabel="Disable user"
                  disabled={action.busy}
                  onConfirm={() => void disable(user)}
                />
              )
            }
          />
        )}
      </Listing>
    </>
  );
}

function NewUserForm({ onCancel, onCreated }: { onCancel: () => void; onCreated: (user: User) => Promise<void> }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [role, setRole] = useState<UserRole>("viewer");
  const create = async () => {
    const user = await mutate(CREATE, "createUser", { input: { email: email.trim(), password, role } });
    await onCreated(user);
  };
  return (
    <CardForm title="Add a user" titleId="new-user-title" submit="Add user" onSubmit={create} onCancel={onCancel}>
      <div class="field">
        <label for="new-user-email">E-mail</label>
        <input id="new-user-email" type="email" required maxLength={254} autoComplete="off" value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="new-user-password">First password</label>
        <input id="new-user-password" type="password" required minLength={10} maxLength={200} autoComplete="new-password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        <p class="muted hint">At least 10 characters. Hand it over privately; they can change it on this page once signed in.</p>
      </div>
      <div class="field">
        <label for="new-user-role">Role</label>
        <select id="new-user-role" value={role} onChange={(e) => setRole(e.currentTarget.value as UserRole)}>
          {ROLES.map((r) => (
            <option key={r} value={r}>
              {r}: {ROLE_WORDS[r]}
            </option>
          ))}
        </select>
      </div>
    </CardForm>
  );
}

function PasswordForm() {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [done, setDone] = useState(false);
  const change = async () => {
    setDone(false);
    await mutate(CHANGE_PASSWORD, "changePassword", { input: { currentPassword: current, newPassword: next } });
    setCurrent("");
    setNext("");
    setDone(true);
    announce("Your password is changed");
  };
  return (
    <CardForm
      id="your-password"
      title="Your password"
      titleId="password-title"
      submit="Change password"
      onSubmit={change}
      status={
        done && (
          <p class="ok" role="status">
            Password changed. Use it the next time you sign in.
          </p>
        )
      }
    >
      <div class="field">
        <label for="current-password">Current password</label>
        <input id="current-password" type="password" required autoComplete="current-password" value={current} onInput={(e) => setCurrent(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="new-password">New password</label>
        <input id="new-password" type="password" required minLength={10} maxLength={200} autoComplete="new-password" value={next} onInput={(e) => setNext(e.currentTarget.value)} />
      </div>
    </CardForm>
  );
}
