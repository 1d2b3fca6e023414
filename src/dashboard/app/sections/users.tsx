import { useState } from "preact/hooks";
import { ERROR_FIELDS, expectOk, gql, type Result } from "../api.ts";
import { formatDate } from "../format.ts";
import type { Session } from "../session.ts";
import { Badge, ConfirmButton, EmptyState, ErrorNote, Loading, PageHeader, TableWrap, announce, useAction, useQuery } from "../ui.tsx";

const FIELDS = "databaseId email role createdAt disabledAt";
const LIST = `query DashboardUsers { users { ${FIELDS} } }`;
const CREATE = `mutation DashboardCreateUser($input: CreateUserInput!) { createUser(input: $input) { ${ERROR_FIELDS} ... on User { ${FIELDS} } } }`;
const CHANGE_ROLE = `mutation DashboardChangeUserRole($input: ChangeUserRoleInput!) { changeUserRole(input: $input) { ${ERROR_FIELDS} ... on User { ${FIELDS} } } }`;
const DISABLE = `mutation DashboardDisableUser($id: Int!) { disableUser(id: $id) { ${ERROR_FIELDS} ... on User { ${FIELDS} } } }`;
const CHANGE_PASSWORD = `mutation DashboardChangePassword($input: ChangePasswordInput!) { changePassword(input: $input) { ${ERROR_FIELDS} ... on User { databaseId } } }`;

const ROLES = ["owner", "developer", "viewer"] as const;
const ROLE_WORDS: Record<string, string> = {
  owner: "everything: live mode, payouts, users",
  developer: "changes test-mode data, reads live",
  viewer: "reads only",
};

interface User {
  databaseId: number;
  email: string;
  role: string;
  createdAt: string;
  disabledAt: string | null;
}

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
  const { data, error, loading, reload } = useQuery<{ users: User[] }>(LIST);
  const [adding, setAdding] = useState(false);
  const action = useAction();

  const changeRole = (user: User, role: string) =>
    action.run(async () => {
      expectOk((await gql<{ changeUserRole: Result<{ __typename: "User" }> }>(CHANGE_ROLE, { input: { id: user.databaseId, role } })).changeUserRole);
      await reload(); // announced once the table shows it, so what is read out and what is seen agree
      announce(`${user.email} is now ${role}`);
    });
  const disable = (user: User) =>
    action.run(async () => {
      expectOk((await gql<{ disableUser: Result<{ __typename: "User" }> }>(DISABLE, { id: user.databaseId })).disableUser);
      await reload();
      announce(`${user.email} is disabled and signed out`);
    });

  const users = data?.users;
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
        Roles: {ROLES.map((role) => `${role} (${ROLE_WORDS[role]})`).join("; ")}. A new role applies from the user's next token refresh, within minutes;
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
      <ErrorNote message={error ?? action.error} />
      {!users && loading && <Loading />}
      {users && users.length === 0 && <EmptyState title="No users" />}
      {users && users.length > 0 && (
        <TableWrap label="Team">
          <thead>
            <tr>
              <th scope="col">E-mail</th>
              <th scope="col">Role</th>
              <th scope="col">State</th>
              <th scope="col">Added</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody id="users">
            {users.map((user) => {
              const self = user.databaseId === session.user.id;
              const editable = !self && !user.disabledAt;
              return (
                <tr key={user.databaseId} data-email={user.email}>
                  <th scope="row" data-label="E-mail" class="break">
                    {user.email}
                    {self && <span class="muted"> (you)</span>}
                  </th>
                  <td data-label="Role">
                    {editable ? (
                      <select aria-label={`Role of ${user.email}`} value={user.role} disabled={action.busy} onChange={(e) => void changeRole(user, e.currentTarget.value)}>
                        {ROLES.map((role) => (
                          <option key={role} value={role}>
                            {role}
                          </option>
                        ))}
                      </select>
                    ) : (
                      <span class="role">{user.role}</span>
                    )}
                  </td>
                  <td data-label="State">{user.disabledAt ? <Badge value={`disabled ${formatDate(user.disabledAt)}`} kind="failed" /> : <Badge value="active" kind="completed" />}</td>
                  <td data-label="Added">{formatDate(user.createdAt)}</td>
                  <td class="actions">
                    {editable && (
                      <ConfirmButton
                        label="Disable"
                        question={`Disable ${user.email}? They are signed out and can no longer sign in.`}
                        confirmLabel="Disable user"
                        disabled={action.busy}
                        onConfirm={() => void disable(user)}
                      />
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </TableWrap>
      )}
    </>
  );
}

function NewUserForm({ onCancel, onCreated }: { onCancel: () => void; onCreated: (user: User) => Promise<void> }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [role, setRole] = useState<string>("viewer");
  const create = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    void create.run(async () => {
      const user = expectOk((await gql<{ createUser: Result<User & { __typename: "User" }> }>(CREATE, { input: { email: email.trim(), password, role } })).createUser);
      await onCreated(user);
    });
  };
  return (
    <form class="card form" onSubmit={submit} aria-labelledby="new-user-title">
      <h2 id="new-user-title">Add a user</h2>
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
        <select id="new-user-role" value={role} onChange={(e) => setRole(e.currentTarget.value)}>
          {ROLES.map((r) => (
            <option key={r} value={r}>
              {r}: {ROLE_WORDS[r]}
            </option>
          ))}
        </select>
      </div>
      <ErrorNote message={create.error} />
      <div class="row">
        <button type="submit" disabled={create.busy}>
          Add user
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function PasswordForm() {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [done, setDone] = useState(false);
  const change = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    setDone(false);
    void change.run(async () => {
      expectOk((await gql<{ changePassword: Result<{ __typename: "User" }> }>(CHANGE_PASSWORD, { input: { currentPassword: current, newPassword: next } })).changePassword);
      setCurrent("");
      setNext("");
      setDone(true);
      announce("Your password is changed");
    });
  };
  return (
    <form class="card form" id="your-password" onSubmit={submit} aria-labelledby="password-title">
      <h2 id="password-title">Your password</h2>
      <div class="field">
        <label for="current-password">Current password</label>
        <input id="current-password" type="password" required autoComplete="current-password" value={current} onInput={(e) => setCurrent(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="new-password">New password</label>
        <input id="new-password" type="password" required minLength={10} maxLength={200} autoComplete="new-password" value={next} onInput={(e) => setNext(e.currentTarget.value)} />
      </div>
      <ErrorNote message={change.error} />
      {done && (
        <p class="ok" role="status">
          Password changed. Use it the next time you sign in.
        </p>
      )}
      <div class="row">
        <button type="submit" disabled={change.busy}>
          Change password
        </button>
      </div>
    </form>
  );
}
