import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { graphql } from "../gql/index.ts";
import { apiClient, bearerClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/**
 * An owner manages the team over GraphQL (list, create, change role, disable) and every user changes their own
 * password, signed in over real HTTP with the tokens /v1/auth/login hands out.
 */
const Users = graphql(`
  query TeamUsers {
    users { databaseId email role disabledAt }
  }
`);

/** What creating a user and changing a role answer: the user's id and role. */
graphql(`
  fragment MemberRole on User {
    databaseId
    role
  }
`);

const CreateUser = graphql(`
  mutation TeamCreateUser($input: CreateUserInput!) {
    createUser(input: $input) { __typename ...MemberRole ...Failure }
  }
`);

const ChangeRole = graphql(`
  mutation TeamChangeRole($input: ChangeUserRoleInput!) {
    changeUserRole(input: $input) { __typename ...MemberRole ...Failure }
  }
`);

const Disable = graphql(`
  mutation TeamDisable($id: Int!) {
    disableUser(id: $id) { __typename ... on User { databaseId disabledAt } ...Failure }
  }
`);

const ChangePassword = graphql(`
  mutation TeamChangePassword($input: ChangePasswordInput!) {
    changePassword(input: $input) { __typename ... on User { email } ...FieldFailure }
  }
`);

describe("the team: users managed by an owner, passwords by everyone", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  let other: TestMerchant;
  let owner: { id: number; email: string; password: string };
  let ownerToken: string;

  const login = (email: string, password: string, mode: "test" | "live" = "test") => apiClient(gw.url).post("/v1/auth/login", { email, password, mode });
  const tokenOf = async (email: string, password: string, mode: "test" | "live" = "test") => {
    const res = await login(email, password, mode);
    expect(res.status, res.text).toBe(200);
    return res.body.data as { access_token: string; refresh_token: string; user: { role: string } };
  };

  beforeAll(async () => {
    gw = await startTestGateway();
    merchant = await gw.createMerchant("Team");
    other = await gw.createMerchant("Elsewhere");
    owner = await gw.createUser(merchant.id, "owner");
    ownerToken = (await tokenOf(owner.email, owner.password)).access_token;
  });
  afterAll(() => gw?.close());

  it("an owner creates a viewer, makes it a developer (from its next refresh) and disables it (no sign-in, sessions ended)", async () => {
    const asOwner = bearerClient(gw.url, ownerToken);
    const created = await asOwner.graphql(CreateUser, { input: { email: "clerk@team.test", password: "clerk-password-1", role: "viewer" } });
    expect(created.body.data?.createUser).toEqual({ __typename: "User", databaseId: expect.any(Number), role: "viewer" });
    const clerkId = (created.body.data!.createUser as { databaseId: number }).databaseId;
    const session = await tokenOf("clerk@team.test", "clerk-password-1");
    expect(session.user.role).toBe("viewer");

    const changed = await asOwner.graphql(ChangeRole, { input: { id: clerkId, role: "developer" } });
    expect(changed.body.data?.changeUserRole).toEqual({ __typename: "User", databaseId: clerkId, role: "developer" });
    const refreshed = await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: session.refresh_token });
    expect(refreshed.status, refreshed.text).toBe(200);
    expect(refreshed.body.data.user.role).toBe("developer");

    const disabled = await asOwner.graphql(Disable, { id: clerkId });
    expect(disabled.body.data?.disableUser).toEqual({ __typename: "User", databaseId: clerkId, disabledAt: expect.any(String) });
    // Disabling twice is the same as once.
    expect((await asOwner.graphql(Disable, { id: clerkId })).body.data?.disableUser).toMatchObject({ __typename: "User", databaseId: clerkId });
    const refused = await login("clerk@team.test", "clerk-password-1");
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("invalid_credentials");
    const noRefresh = await apiClient(gw.url).post("/v1/auth/refresh", { refresh_token: refreshed.body.data.refresh_token });
    expect(noRefresh.status).toBe(401);

    const list = await asOwner.graphql(Users);
    expect(list.body.data?.users).toEqual([
      { databaseId: owner.id, email: owner.email, role: "owner", disabledAt: null },
      { databaseId: clerkId, email: "clerk@team.test", role: "developer", disabledAt: expect.any(String) },
    ]);
  });

  it("owners only, never on themselves, never on another merchant's users", async () => {
    const viewer = await gw.createUser(merchant.id, "viewer");
    const developer = await gw.createUser(merchant.id, "developer");
    const asOwner = bearerClient(gw.url, ownerToken);
    for (const who of [viewer, developer]) {
      const client = bearerClient(gw.url, (await tokenOf(who.email, who.password)).access_token);
      const role = await client.graphql(ChangeRole, { input: { id: owner.id, role: "viewer" } });
      expect(role.body.errors?.[0]?.extensions?.code, who.email).toBe("forbidden");
      const disable = await client.graphql(Disable, { id: owner.id });
      expect(disable.body.errors?.[0]?.extensions?.code, who.email).toBe("forbidden");
      expect((await client.graphql(Users)).body.errors?.[0]?.extensions?.code).toBe("forbidden");
    }
    expect((await asOwner.graphql(ChangeRole, { input: { id: owner.id, role: "viewer" } })).body.data?.changeUserRole).toEqual({
      __typename: "GatewayError",
      code: "forbidden",
      message: "You cannot change the role of yourself; ask another owner",
    });
    expect((await asOwner.graphql(Disable, { id: owner.id })).body.data?.disableUser).toMatchObject({ __typename: "GatewayError", code: "forbidden" });
    const stranger = await gw.createUser(other.id, "viewer");
    expect((await asOwner.graphql(Disable, { id: stranger.id })).body.data?.disableUser).toMatchObject({ __typename: "NotFoundError", code: "not_found" });
    expect((await asOwner.graphql(ChangeRole, { input: { id: stranger.id, role: "owner" } })).body.data?.changeUserRole).toMatchObject({ __typename: "NotFoundError" });
    // The stranger is untouched.
    expect((await login(stranger.email, stranger.password)).body.data.user.role).toBe("viewer");
  });

  it("every user changes their own password with the current one, a viewer and a developer in live mode included; an API key cannot", async () => {
    const viewer = await gw.createUser(merchant.id, "viewer");
    const developer = await gw.createUser(merchant.id, "developer");
    for (const [who, mode] of [[viewer, "test"], [developer, "live"]] as const) {
      const client = bearerClient(gw.url, (await tokenOf(who.email, who.password, mode)).access_token);
      const wrong = await client.graphql(ChangePassword, { input: { currentPassword: "not-it-at-all", newPassword: "a-new-password-1" } });
      expect(wrong.body.data?.changePassword).toMatchObject({ __typename: "ValidationError", field: "currentPassword", code: "validation_failed" });
      const short = await client.graphql(ChangePassword, { input: { currentPassword: who.password, newPassword: "short" } });
      expect(short.body.data?.changePassword).toMatchObject({ __typename: "ValidationError", field: "newPassword" });
      const changed = await client.graphql(ChangePassword, { input: { currentPassword: who.password, newPassword: `new-${who.password}` } });
      expect(changed.body.data?.changePassword, changed.text).toEqual({ __typename: "User", email: who.email });
      expect((await login(who.email, who.password)).status).toBe(401);
      expect((await login(who.email, `new-${who.password}`)).status).toBe(200);
    }
    const withKey = await apiClient(gw.url, merchant.testKey).graphql(ChangePassword, { input: { currentPassword: "x", newPassword: "0123456789ab" } });
    // Refused by the authorization table (issue 35) before the resolver runs: a GraphQL error, no typed result.
    expect(withKey.body.data ?? null, withKey.text).toBeNull();
    expect(withKey.body.errors?.[0]).toMatchObject({ message: "Only a signed-in user has a password to change; an API key has none", extensions: { code: "forbidden" } });
  });
});
