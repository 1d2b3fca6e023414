import { readFileSync } from "node:fs";
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLObjectType,
} from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { schema } from "../../src/app/schema.ts";
import { apiClient, startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * Every principal (an API key and a signed-in user, of each role, in each mode) tries every query and mutation of
 * the schema, and the answers must match the authorization table of docs/dashboard.md exactly: refused (`forbidden`) where the
 * table gives the principal no access in its mode, never refused where it does. The expected answers are read from
 * the docs, the document merchants read, not from the code that enforces it.
 */
type Kind = "key owner" | "key developer" | "key viewer" | "user owner" | "user developer" | "user viewer";
const KINDS: Kind[] = ["key owner", "key developer", "key viewer", "user owner", "user developer", "user viewer"];
const MODES = ["test", "live"] as const;

/** The table in docs/dashboard.md: operation -> principal kind -> the modes it may use it in. */
function documentedTable(): Map<string, Record<Kind, string[]>> {
  const doc = readFileSync(new URL("../../docs/dashboard.md", import.meta.url), "utf8");
  const start = doc.indexOf("| permission | what it covers | operations |");
  expect(start, "docs/dashboard.md has the authorization table").toBeGreaterThan(0);
  const lines = doc.slice(start).split("\n");
  const header = lines[0]!.split("|").slice(1, -1).map((cell) => cell.trim());
  const table = new Map<string, Record<Kind, string[]>>();
  for (const line of lines.slice(2)) {
    if (!line.startsWith("|")) break;
    const cells = line.split("|").slice(1, -1).map((cell) => cell.trim());
    const modes = Object.fromEntries(KINDS.map((kind) => [kind, cells[header.indexOf(kind)] === "-" ? [] : cells[header.indexOf(kind)]!.split(", ")])) as Record<Kind, string[]>;
    for (const operation of cells[2]!.match(/`[A-Za-z][A-Za-z0-9]*`/g) ?? []) table.set(operation.slice(1, -1), modes);
  }
  return table;
}

/** A value GraphQL accepts for a required argument: valid for its type, pointing at nothing that exists. */
function sample(type: GraphQLInputType): unknown {
  if (isNonNullType(type)) return sample(type.ofType);
  if (isListType(type)) return [sample(type.ofType)];
  if (isEnumType(type)) return type.getValues()[0]!.value;
  if (isInputObjectType(type)) {
    return Object.fromEntries(Object.values(type.getFields()).filter((f) => isNonNullType(f.type)).map((f) => [f.name, sample(f.type)]));
  }
  if (isScalarType(type)) {
    const samples: Record<string, unknown> = { String: "x", ID: "x", Int: 2_147_483_000, Float: 1, Boolean: false, DateTime: "2026-01-01T00:00:00.000Z", BigInt: 100, JSON: {} };
    if (!(type.name in samples)) throw new Error(`no sample for scalar ${type.name}`);
    return samples[type.name];
  }
  throw new Error(`no sample for ${String(type)}`);
}

/** An operation selecting one root field with its required arguments as variables, and __typename (or nothing, for a leaf). */
function operationFor(kind: "query" | "mutation", field: GraphQLField<unknown, unknown>) {
  const required = field.args.filter((arg) => isNonNullType(arg.type));
  const declared = required.map((arg) => `$${arg.name}: ${String(arg.type)}`).join(", ");
  const passed = required.map((arg) => `${arg.name}: $${arg.name}`).join(", ");
  const leaf = isScalarType(getNamedType(field.type)) || isEnumType(getNamedType(field.type));
  return {
    query: `${kind}${declared ? `(${declared})` : ""} { ${field.name}${passed ? `(${passed})` : ""}${leaf ? "" : " { __typename }"} }`,
    variables: Object.fromEntries(required.map((arg) => [arg.name, sample(arg.type)])),
  };
}

describe("the authorization table: every principal x every query and mutation, in both modes", () => {
  let gw: TestGateway;
  const credentials = new Map<string, Record<string, string>>();

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false" } });
    const merchant = await gw.createMerchant("Table");
    for (const mode of MODES) {
      for (const role of ["owner", "developer", "viewer"] as const) {
        // Keys of each role, as the operator's CLI makes them (a signed-in user makes them at most its own role).
        const key = await gw.gateway.services.merchants.createKey(merchant.id, mode, { role });
        credentials.set(`key ${role}:${mode}`, { "x-api-key": key.plaintext });
        const user = await gw.createUser(merchant.id, role);
        const login = await apiClient(gw.url).post("/v1/auth/login", { email: user.email, password: user.password, mode });
        expect(login.status, login.text).toBe(200);
        credentials.set(`user ${role}:${mode}`, { authorization: `Bearer ${login.body.data.access_token}` });
      }
    }
  });
  afterAll(() => gw?.close());

  it("the documented table names every query and mutation of the schema, and nothing else", () => {
    const table = documentedTable();
    const fields = ["Query", "Mutation", "Subscription"].flatMap((name) => Object.keys((schema.getType(name) as GraphQLObjectType).getFields()));
    expect([...table.keys()].sort()).toEqual([...fields].sort());
  });

  for (const rootKind of ["query", "mutation"] as const) {
    it(`every ${rootKind}: refused exactly where the table says so`, async () => {
      const table = documentedTable();
      const root = rootKind === "query" ? schema.getQueryType()! : schema.getMutationType()!;
      const mismatches: string[] = [];
      let refusals = 0;
      let permitted = 0;
      for (const field of Object.values(root.getFields())) {
        const { query, variables } = operationFor(rootKind, field);
        for (const kind of KINDS) {
          for (const mode of MODES) {
            const expected = table.get(field.name)![kind].includes(mode);
            const res = await apiClient(gw.url).post("/graphql", { query, variables }, credentials.get(`${kind}:${mode}`));
            const errors = (res.body?.errors ?? []) as { message: string; extensions?: { code?: string } }[];
            const refused = errors.some((e) => e.extensions?.code === "forbidden");
            // Anything else that is not an answer of the field itself (a bad credential, a malformed sample) is a broken test, not a pass.
            const unexpected = errors.filter((e) => e.extensions?.code !== "forbidden" && /Invalid API key|invalid_token|Variable|Cannot query|Unknown/.test(`${e.extensions?.code} ${e.message}`));
            if (unexpected.length) mismatches.push(`${field.name} as ${kind} (${mode}): ${unexpected.map((e) => e.message).join("; ")}`);
            if (refused === expected) mismatches.push(`${field.name} as ${kind} (${mode}): ${refused ? "refused" : "permitted"}, the table says ${expected ? "permitted" : "refused"}`);
            if (refused) refusals++;
            else permitted++;
          }
        }
      }
      expect(mismatches).toEqual([]);
      // Both answers occur (so the check above could fail either way).
      expect(refusals).toBeGreaterThan(0);
      expect(permitted).toBeGreaterThan(0);
    });
  }
});
