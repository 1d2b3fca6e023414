import { beforeAll, describe, expect, it } from "vitest";
import { normalizeEmail } from "../../src/modules/customers/service.ts";
import { normalizePhone } from "../../src/phone.ts";
import { graphql } from "../gql/index.ts";
import { validationError } from "../support/documents.ts";
import { apiClient, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { useTestGateway } from "../support/fixture.ts";

const CustomersList = graphql(`
  query CustomersList($search: String, $page: Int, $limit: Int) {
    customers(search: $search, page: $page, limit: $limit) {
      __typename
      ... on CustomerPage {
        items { id ...CustomerContact createdAt }
        total page limit pages
      }
      ...FieldFailure
    }
  }
`);

const CustomersCreate = graphql(`
  mutation CustomersCreate($input: CreateCustomerInput!) {
    createCustomer(input: $input) {
      __typename
      ...CustomerContact
      ...Failure
      ... on ConflictError { field }
    }
  }
`);

const isoMillis = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const phoneProblem = "must be a Kenyan mobile number: 2547XXXXXXXX, +2547XXXXXXXX, 07XXXXXXXX or 01XXXXXXXX, or an international number with its leading +, e.g. +447911123456";
/** A one-field refusal: its message ("field: problem"), and the same in the errors list. */
const validationEnvelope = (message: string) => {
  const at = message.indexOf(": ");
  return { status: "error", message, code: "validation_failed", errors: [{ field: message.slice(0, at), message: message.slice(at + 2) }] };
};

interface LegacyCustomer {
  id: number;
  email: string;
  first_name: string | null;
  last_name: string | null;
  phone: string | null;
  created_at: string;
}

describe("customers", () => {
  let gw: TestGateway;
  let acme: TestMerchant;
  useTestGateway({}, async (started) => {
    gw = started;
    acme = await gw.createMerchant("Acme");
  });

  const rest = (key: string) => apiClient(gw.url, key);
  const createCustomer = (key: string, body: unknown) => rest(key).post("/api/customers/create", body);
  const listCustomers = (key: string, query = "") => rest(key).get(`/api/customers/list${query}`);
  const principal = (m: TestMerchant, mode: "test" | "live" = "test") => ({ merchantId: m.id, mode, role: "owner" as const, userId: null, keyId: null, keyPrefix: null });

  describe("POST /api/customers/create", () => {
    it("creates a customer and answers 201 with the documented body, normalising e-mail and phone", async () => {
      const res = await createCustomer(acme.testKey, {
        email: "  Jane.Doe@Example.COM ",
        first_name: "Jane",
        last_name: "Doe",
        phone: "+254 712 345 678",
      });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        status: "success",
        message: "Customer created",
        customer: {
          id: expect.any(Number),
          email: "jane.doe@example.com",
          first_name: "Jane",
          last_name: "Doe",
          phone: "+254712345678",
          created_at: expect.stringMatching(isoMillis),
        },
      });
    });

    it("needs only an e-mail and ignores unknown fields", async () => {
      const res = await createCustomer(acme.testKey, { email: "only@example.com", nickname: "x", first_name: "  " });
      expect(res.status).toBe(201);
      expect(res.body.customer).toEqual({
        id: expect.any(Number),
        email: "only@example.com",
        first_name: null,
        last_name: null,
        phone: null,
        created_at: expect.stringMatching(isoMillis),
      });
    });

    it.each([
      ["no e-mail", { first_name: "A" }, "email: is required"],
      ["a blank e-mail", { email: "  " }, "email: is required"],
      ["an invalid e-mail", { email: "not-an-email" }, "email: must be a valid e-mail address"],
      ["an e-mail over 254 characters", { email: `${"a".repeat(250)}@example.com` }, "email: must be a valid e-mail address"],
      ["a numeric e-mail", { email: 12 }, "email: must be a string"],
      ["a first name over 100 characters", { email: "a@example.com", first_name: "x".repeat(101) }, "first_name: must be at most 100 characters"],
      ["a last name over 100 characters", { email: "a@example.com", last_name: "x".repeat(101) }, "last_name: must be at most 100 characters"],
      ["an array first name", { email: "a@example.com", first_name: ["A"] }, "first_name: must be a string"],
      ["a boolean last name", { email: "a@example.com", last_name: true }, "last_name: must be a string"],
      ["a foreign phone without +", { email: "a@example.com", phone: "447911123456" }, `phone: ${phoneProblem}`],
      ["a landline without +", { email: "a@example.com", phone: "254202222222" }, `phone: ${phoneProblem}`],
      ["a too-short phone", { email: "a@example.com", phone: "+2547" }, `phone: ${phoneProblem}`],
      ["a phone with letters", { email: "a@example.com", phone: "+25471234567x" }, `phone: ${phoneProblem}`],
      ["a numeric phone", { email: "a@example.com", phone: 254712345678 }, "phone: must be a string"],
    ])("rejects %s with a 400 naming the field", async (_label, body, message) => {
      const res = await createCustomer(acme.testKey, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(validationEnvelope(message));
    });

    it("rejects a duplicate e-mail with a 409, ignoring case", async () => {
      expect((await createCustomer(acme.testKey, { email: "dup@example.com" })).status).toBe(201);
      const res = await createCustomer(acme.testKey, { email: "DUP@example.com", first_name: "Again" });
      expect(res.status).toBe(409);
      expect(res.body).toEqual({ status: "error", message: "A customer with email dup@example.com already exists", code: "conflict" });
    });

    it("lets one concurrent create of an e-mail win and answers 409 to the rest", async () => {
      const results = await Promise.all(Array.from({ length: 6 }, () => createCustomer(acme.testKey, { email: "race@example.com" })));
      expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    });

    it("allows the same e-mail for another merchant and in the other mode", async () => {
      const other = await gw.createMerchant();
      await createCustomer(acme.testKey, { email: "shared@example.com" });
      expect((await createCustomer(other.testKey, { email: "shared@example.com" })).status).toBe(201);
      expect((await createCustomer(acme.liveKey, { email: "shared@example.com" })).status).toBe(201);
    });

    it("GraphQL createCustomer reports a duplicate as a typed ConflictError on email", async () => {
      const client = rest(acme.testKey);
      const created = await client.graphql(CustomersCreate, { input: { email: "gql@example.com", firstName: "G", phone: "+2348031234567" } });
      expect(created.body.data?.createCustomer).toMatchObject({
        __typename: "Customer",
        email: "gql@example.com",
        firstName: "G",
        lastName: null,
        phone: "+2348031234567",
      });
      const duplicate = await client.graphql(CustomersCreate, { input: { email: "gql@example.com" } });
      expect(duplicate.body.data?.createCustomer).toEqual({
        __typename: "ConflictError",
        code: "conflict",
        message: "A customer with email gql@example.com already exists",
        field: "email",
      });
    });
  });

  describe("GET /api/customers/list", () => {
    let shop: TestMerchant;
    const seeded: LegacyCustomer[] = [];

    beforeAll(async () => {
      shop = await gw.createMerchant();
      const people = [
        { email: "amina@example.com", first_name: "Amina", last_name: "Otieno", phone: "+254712000001" },
        { email: "brian@example.org", first_name: "Brian", last_name: "Kamau", phone: "+254722000002" },
        { email: "chidi@example.ng", first_name: "Chidi", last_name: "Okafor", phone: "+2348031230003" },
        { email: "dora@example.com", first_name: "Dora", last_name: "AMINAH", phone: null },
        { email: "eve@sample.net" },
      ];
      // Sequential, so creation order (and therefore newest-first order) is known.
      for (const person of people) seeded.push((await createCustomer(shop.testKey, person)).body.customer);
    });

    const newestFirst = () => [...seeded].reverse();

    it("lists newest first with the paged envelope and defaults page 1, limit 20", async () => {
      const res = await listCustomers(shop.testKey);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: "success", data: newestFirst(), total: 5, page: 1, limit: 20, pages: 1 });
    });

    it("pages through with limit, including the last page and a page beyond the end", async () => {
      const page1 = await listCustomers(shop.testKey, "?page=1&limit=2");
      expect(page1.body).toEqual({ status: "success", data: newestFirst().slice(0, 2), total: 5, page: 1, limit: 2, pages: 3 });
      const page3 = await listCustomers(shop.testKey, "?page=3&limit=2");
      expect(page3.body).toEqual({ status: "success", data: newestFirst().slice(4), total: 5, page: 3, limit: 2, pages: 3 });
      const beyond = await listCustomers(shop.testKey, "?page=9&limit=2");
      expect(beyond.status).toBe(200);
      expect(beyond.body).toEqual({ status: "success", data: [], total: 5, page: 9, limit: 2, pages: 3 });
      const max = await listCustomers(shop.testKey, "?limit=100");
      expect(max.body).toMatchObject({ total: 5, limit: 100, pages: 1 });
    });

    it("is an empty page for a merchant without customers", async () => {
      const m = await gw.createMerchant();
      const res = await listCustomers(m.testKey);
      expect(res.body).toEqual({ status: "success", data: [], total: 0, page: 1, limit: 20, pages: 0 });
    });

    it.each([
      ["?limit=101", "limit: must be at most 100"],
      ["?limit=0", "limit: must be a positive integer"],
      ["?limit=ten", "limit: must be an integer"],
      ["?page=0", "page: must be a positive integer"],
      ["?page=-1", "page: must be a positive integer"],
      ["?page=abc", "page: must be an integer"],
      ["?page=1.5", "page: must be an integer"],
      ["?page=1&page=2", "page: must be given once"],
      [`?search=${"x".repeat(101)}`, "search: must be at most 100 characters"],
    ])("%s is a 400 naming the parameter", async (query, message) => {
      const res = await listCustomers(shop.testKey, query);
      expect(res.status).toBe(400);
      expect(res.body).toEqual(validationEnvelope(message));
    });

    it.each([
      ["first name, partial and any case", "AMIN", ["dora@example.com", "amina@example.com"]],
      ["last name", "kama", ["brian@example.org"]],
      ["e-mail", "EXAMPLE.COM", ["dora@example.com", "amina@example.com"]],
      ["e-mail domain", "sample", ["eve@sample.net"]],
      ["phone", "80312", ["chidi@example.ng"]],
      ["phone with +", "+2547", ["brian@example.org", "amina@example.com"]],
      ["nothing", "zzz", []],
    ])("search matches by %s", async (_label, search, emails) => {
      const res = await listCustomers(shop.testKey, `?search=${encodeURIComponent(search)}`);
      expect(res.status).toBe(200);
      expect(res.body.data.map((c: LegacyCustomer) => c.email)).toEqual(emails);
      expect(res.body.total).toBe(emails.length);
    });

    it("returns the same records as GraphQL customers", async () => {
      for (const [query, variables] of [
        ["", {}],
        ["?page=2&limit=2", { page: 2, limit: 2 }],
        ["?search=amin", { search: "amin" }],
      ] as const) {
        const viaRest = (await listCustomers(shop.testKey, query)).body;
        const result = (await rest(shop.testKey).graphql(CustomersList, variables)).body.data?.customers;
        if (result?.__typename !== "CustomerPage") throw new Error(JSON.stringify(result));
        const { __typename, items, ...totals } = result;
        expect({
          status: "success",
          data: items.map((c) => ({
            id: c.databaseId,
            email: c.email,
            first_name: c.firstName,
            last_name: c.lastName,
            phone: c.phone,
            created_at: c.createdAt,
          })),
          ...totals,
        }).toEqual(viaRest);
      }
    });

    it("GraphQL customers reports bad paging as a typed ValidationError", async () => {
      const res = await rest(shop.testKey).graphql(CustomersList, { limit: 500 });
      expect(res.body.errors).toBeUndefined();
      expect(res.body.data?.customers).toEqual(validationError("limit", "must be at most 100"));
    });

    it("is scoped to the merchant and the key's mode", async () => {
      const other = await gw.createMerchant();
      await createCustomer(other.testKey, { email: "amina@example.com", first_name: "Other Amina" });
      expect((await listCustomers(other.testKey)).body.total).toBe(1);
      expect((await listCustomers(shop.testKey)).body.total).toBe(5);
      expect((await listCustomers(shop.liveKey)).body).toEqual({ status: "success", data: [], total: 0, page: 1, limit: 20, pages: 0 });
      expect((await listCustomers(other.testKey, "?search=otieno")).body.data).toEqual([]);
    });
  });

  describe("findOrCreateCustomer (for the transactions module)", () => {
    it("returns one customer for concurrent calls with the same e-mail", async () => {
      const m = await gw.createMerchant();
      const customers = gw.gateway.services.customers;
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => customers.findOrCreateCustomer(principal(m), { email: i % 2 ? "Pay@Example.com" : "pay@example.com", firstName: `P${i}` })),
      );
      expect(new Set(results.map((c) => c.id)).size).toBe(1);
      expect(results[0]).toMatchObject({ email: "pay@example.com", merchantId: m.id, mode: "test" });
      expect((await listCustomers(m.testKey)).body.total).toBe(1);
    });

    it("returns an existing customer unchanged, and works inside a caller's transaction", async () => {
      const m = await gw.createMerchant();
      const existing = (await createCustomer(m.testKey, { email: "known@example.com", first_name: "Known" })).body.customer as LegacyCustomer;
      const customers = gw.gateway.services.customers;
      const [inTx, created] = await gw.gateway.db.prisma.$transaction(async (tx) => [
        await customers.findOrCreateCustomer(principal(m), { email: "known@example.com", firstName: "Other" }, tx),
        await customers.findOrCreateCustomer(principal(m), { email: "new@example.com", phone: "+254712345678" }, tx),
      ]);
      expect(inTx).toMatchObject({ id: existing.id, firstName: "Known" });
      expect(created).toMatchObject({ email: "new@example.com", phone: "+254712345678", firstName: null });
      expect((await customers.findOrCreateCustomer(principal(m, "live"), { email: "known@example.com" })).id).not.toBe(existing.id);
    });

    it("validates like createCustomer", async () => {
      const m = await gw.createMerchant();
      await expect(gw.gateway.services.customers.findOrCreateCustomer(principal(m), { email: "x@example.com", phone: "0712" })).rejects.toMatchObject({
        code: "validation_failed",
        field: "phone",
      });
    });
  });

  describe("normalizeEmail and normalizePhone", () => {
    it("normalise valid values and name the given field in errors", () => {
      expect(normalizeEmail(" A@B.co ")).toBe("a@b.co");
      expect(normalizePhone("+254 (712) 345-678")).toBe("+254712345678");
      expect(normalizePhone("+14155552671")).toBe("+14155552671");
      expect(normalizePhone("0712 345 678")).toBe("+254712345678");
      expect(() => normalizePhone("447911123456", "phone_number")).toThrow(`phone_number: ${phoneProblem}`);
      expect(() => normalizeEmail("nope", "payer_email")).toThrow("payer_email: must be a valid e-mail address");
    });
  });
});
