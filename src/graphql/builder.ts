import SchemaBuilder from "@pothos/core";
import ErrorsPlugin from "@pothos/plugin-errors";
import PrismaPlugin from "@pothos/plugin-prisma";
import RelayPlugin from "@pothos/plugin-relay";
import ScopeAuthPlugin from "@pothos/plugin-scope-auth";
import ValidationPlugin from "@pothos/plugin-validation";
import { GraphQLError, valueFromASTUntyped } from "graphql";
import type { Principal } from "../auth.ts";
import { allows, PERMISSIONS, permissionOf, refusal, type Permission } from "../authorization.ts";
import AuthorizationTablePlugin from "./authorization-plugin.ts";
import { getDatamodel } from "../db/generated/pothos-types.ts";
import type PrismaTypes from "../db/generated/pothos-types.ts";
import type { GraphQLContext } from "./context.ts";
import { logErrorResult } from "./logging.ts";
import { noteResolvedError } from "./resolved-errors.ts";
import { cursorArg, decodeGlobalIDOrNothing, loadNodeOrNull, pageSizeArg, toValidationError } from "./relay.ts";

export type GatewaySchemaTypes = {
  Context: GraphQLContext;
  PrismaTypes: PrismaTypes;
  /** One scope per permission of the authorization table (src/authorization.ts), which also assigns them to root fields. */
  AuthScopes: Record<Permission, boolean>;
  AuthContexts: Record<Permission, GraphQLContext & { principal: Principal }>;
  DefaultFieldNullability: false;
  Scalars: {
    DateTime: { Input: Date; Output: Date | string };
    BigInt: { Input: bigint; Output: bigint | number };
    JSON: { Input: unknown; Output: unknown };
  };
};

// Annotated because the relay options below refer to the builder itself.
export const builder: PothosSchemaTypes.SchemaBuilder<PothosSchemaTypes.ExtendDefaultTypes<GatewaySchemaTypes>> = new SchemaBuilder<GatewaySchemaTypes>({
  // The table's scopes first, then scope-auth, so authorization runs before anything else wraps a resolver.
  plugins: [AuthorizationTablePlugin, ScopeAuthPlugin, ErrorsPlugin, ValidationPlugin, PrismaPlugin, RelayPlugin],
  defaultFieldNullability: false,
  scopeAuth: {
    authScopes: (ctx) => scopesOf(ctx.principal),
    // REST maps the code to the catalogue's 401 or 403 envelope; GraphQL clients read it from extensions.
    unauthorizedError: (_parent, ctx, info) => {
      const principal = ctx.principal;
      if (!principal) return new GraphQLError("Invalid API key", { extensions: { code: "invalid_api_key" } });
      const permission = permissionOf(info.parentType.name, info.fieldName) ?? "signed_in_owner";
      return new GraphQLError(refusal(principal, permission), { extensions: { code: "forbidden" } });
    },
  },
  relay: {
    clientMutationId: "omit",
    cursorType: "String",
    // Client-sent ids and cursors are checked here, for every Node and connection (src/graphql/relay.ts):
    // a bad id is null (as a missing or foreign one), a bad cursor a validation_failed naming the argument.
    decodeGlobalID: decodeGlobalIDOrNothing,
    nodeQueryOptions: { resolve: (_root, { id }, ctx, info) => loadNodeOrNull(builder, ctx, info, id) },
    // One list of promises, so one bad or failing id nulls its own entry only.
    nodesQueryOptions: { resolve: (_root, { ids }, ctx, info) => ids.map((id) => loadNodeOrNull(builder, ctx, info, id)) },
    firstArgOptions: { validate: pageSizeArg() },
    lastArgOptions: { validate: pageSizeArg() },
    beforeArgOptions: { validate: cursorArg() },
    afterArgOptions: { validate: cursorArg() },
  },
  validation: { validationError: toValidationError },
  prisma: {
    client: (ctx) => ctx.prisma,
    dmmf: getDatamodel(),
    filterConnectionTotalCount: true,
    onUnusedQuery: null,
  },
  // A fallible field returns its object or an Error type directly (no Success wrapper), everywhere.
  // A typed error result is logged at debug on the request's logger (src/graphql/logging.ts).
  // The instance is kept for a REST row too (resolved-errors.ts): its answer reads more than `code message`.
  errors: {
    defaultTypes: [],
    directResult: true,
    onResolvedError: (error) => {
      logErrorResult(error);
      noteResolvedError(error);
    },
  },
});

/** What a caller may do, by scope (a permission of the table); also read before an Idempotency-Key replay (src/graphql/authorize.ts). */
export function scopesOf(principal: Principal | null): GatewaySchemaTypes["AuthScopes"] {
  return Object.fromEntries((Object.keys(PERMISSIONS) as Permission[]).map((permission) => [permission, allows(principal, permission)])) as GatewaySchemaTypes["AuthScopes"];
}

builder.queryType({});
builder.mutationType({});

builder.scalarType("DateTime", {
  description: "ISO 8601 timestamp in UTC with milliseconds, e.g. 2024-01-31T09:15:00.000Z",
  serialize: (value) => (value instanceof Date ? value.toISOString() : String(value)),
  parseValue: (value) => {
    const date = new Date(String(value));
    if (Number.isNaN(date.getTime())) throw new GraphQLError("DateTime must be an ISO 8601 timestamp");
    return date;
  },
});

builder.scalarType("BigInt", {
  description:
    "Integer amount in the currency's minor unit (KES 10.00 is 1000), as a JSON number both ways: a string such as \"1500\" " +
    "is refused, as the REST API refuses it. Amounts are bounded far below 2^53 so no precision is lost.",
  serialize: (value) => {
    const n = typeof value === "bigint" ? Number(value) : value;
    if (!Number.isSafeInteger(n)) throw new GraphQLError("BigInt value is outside the safe integer range");
    return n;
  },
  parseValue: (value) => {
    // A number only: REST's amount is a JSON integer and a digit string is refused there, so GraphQL agrees (docs/api.md).
    if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value);
    throw new GraphQLError(
      typeof value === "string" ? "BigInt must be an integer given as a JSON number (1500), not a string" : "BigInt must be an integer",
    );
  },
});

/** Free-form JSON, e.g. provider credentials, whose shape the owning service validates. */
builder.scalarType("JSON", {
  description: "Any JSON value. Used for provider credentials, which are validated per provider.",
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (ast, variables) => valueFromASTUntyped(ast, variables ?? undefined),
});
