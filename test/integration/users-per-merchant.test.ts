import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, bearerClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/**
 * Issue 21, item 4: users are unique per merchant. A merchant can neither squat an address at another
 * nor learn that another merchant has it; sign-in asks for merchant_id whenever the e-mail belongs to users at
 * several merchants, before and whatever the password (issue 35, item 2).
 */
const CREATE_USER = `mutation($email: String!, $password: String!) {
  createUser(input: { email: $email, password: $password, role: developer }) {
    __typename ... on User { email role } ... on Error { code message }
  }
}`;

describe("users are unique per merchant", () => {
  let gw: TestGateway;
  let acme: TestMerchant;
  let globex: TestMerchant;
  let initech: TestMerchant;
  const owners: Record<string, string> = {};

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    acme = await gw.createMerchant("Acme");
    globex = await gw.createMerchant("Globex");
    initech = await gw.createMerchant("Initech");
    for (const merchant of [acme, globex]) {
      const owner = await gw.createUser(merchant.id, "owner");
      owners[merchant.name] = (await login({ email: owner.email, password: owner.password })).body.data.access_token;
    }
  });
  afterAll(() => gw?.close());

  const login = (body: Record<string, unknown>) => apiClient(gw.url).post("/v1/auth/login", body);
  const createUser = (merchant: TestMerchant, email: string, password: string) =>
    bearerClient(gw.url, owners[merchant.name]!).post("/graphql", { query: CREATE_USER, variables: { email, password } });
  const address = () => `person-${randomBytes(5).toString("hex")}@shared.test`;

  it("another merchant's user with the same e-mail is created as any new user; a duplicate within one merchant is a conflict", async () => {
    const email = address();
    const first = await createUser(acme, email, "acme-password-1");
    expect(first.body.data.createUser).toEqual({ __typename: "User", email, role: "developer" });
    // Globex learns nothing of Acme's user: the same answer as for an address nobody has.
    const second = await createUser(globex, email, "globex-password-1");
    const fresh = await createUser(globex, address(), "globex-password-2");
    expect(second.body.data.createUser.__typename).toBe("User");
    expect(Object.keys(second.body.data.createUser)).toEqual(Object.keys(fresh.body.data.createUser));
    expect(second.body.errors).toBeUndefined();

    const duplicate = await createUser(acme, email.toUpperCase(), "acme-password-2");
    expect(duplicate.body.data.createUser).toEqual({ __typename: "ConflictError", code: "conflict", message: `This merchant already has a user with e-mail ${email}` });
    const rows = await gw.gateway.db.prisma.user.findMany({ where: { email }, orderBy: { merchantId: "asc" } });
    expect(rows.map((u) => u.merchantId)).toEqual([acme.id, globex.id]);
  });

  it("sign-in: an e-mail several merchants have asks for merchant_id whatever the password; then only that merchant's user is checked", async () => {
    // Before issue 35 (item 2) the password picked the merchant; that made another merchant's user with the same
    // address a password oracle, so now the answer without merchant_id never depends on the password.
    const email = address();
    await createUser(acme, email, "acme-secret-pass");
    await createUser(globex, email, "globex-secret-pass");
    const unnamed = await Promise.all(["acme-secret-pass", "globex-secret-pass", "neither-password"].map((password) => login({ email, password })));
    for (const res of unnamed) {
      expect([res.status, res.body]).toEqual([400, { status: "error", code: "validation_failed", message: "merchant_id: this e-mail signs in to more than one merchant; say which one (merchant_id)", errors: [{ field: "merchant_id", message: "this e-mail signs in to more than one merchant; say which one (merchant_id)" }] }]);
    }
    const atAcme = await login({ email, password: "acme-secret-pass", merchant_id: acme.id });
    expect([atAcme.status, atAcme.body.data?.user.merchant_id]).toEqual([200, acme.id]);
    const atGlobex = await login({ email, password: "globex-secret-pass", merchant_id: globex.id });
    expect([atGlobex.status, atGlobex.body.data?.user.merchant_id]).toEqual([200, globex.id]);
    // The token is for that merchant only.
    const status = await bearerClient(gw.url, atGlobex.body.data.access_token).get("/v1/status");
    expect(status.text).toContain("Globex");
    expect(status.text).not.toContain("Acme");

    const wrong = await login({ email, password: "neither-password", merchant_id: acme.id });
    expect([wrong.status, wrong.body]).toEqual([401, { status: "error", code: "invalid_credentials", message: expect.any(String) }]);
    // merchant_id narrows: Acme's password does not open Globex's user.
    expect((await login({ email, password: "acme-secret-pass", merchant_id: globex.id })).status).toBe(401);
  });

  it("one person with one password at two merchants says which with merchant_id", async () => {
    const email = address();
    await createUser(acme, email, "same-password-everywhere");
    await createUser(globex, email, "same-password-everywhere");
    const ambiguous = await login({ email, password: "same-password-everywhere" });
    expect(ambiguous.status).toBe(400);
    // Neither merchant's id is told (issue 35, item 2): the caller names the merchant it means.
    expect(ambiguous.body).toEqual({ status: "error", code: "validation_failed", message: "merchant_id: this e-mail signs in to more than one merchant; say which one (merchant_id)", errors: [{ field: "merchant_id", message: "this e-mail signs in to more than one merchant; say which one (merchant_id)" }] });
    for (const merchant of [acme, globex]) {
      const res = await login({ email, password: "same-password-everywhere", merchant_id: merchant.id });
      expect([res.status, res.body.data?.user.merchant_id]).toEqual([200, merchant.id]);
    }
    // A merchant the e-mail is not a user of is the plain 401; a malformed merchant_id a 400 naming it.
    expect((await login({ email, password: "same-password-everywhere", merchant_id: initech.id })).status).toBe(401);
    for (const bad of ["1", 0, -3, 1.5]) {
      const res = await login({ email, password: "same-password-everywhere", merchant_id: bad });
      expect([res.status, res.body.code, res.body.message]).toEqual([400, "validation_failed", expect.stringMatching(/^merchant_id: /)]);
    }
  });
});
