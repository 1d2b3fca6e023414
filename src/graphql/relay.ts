import { decodeBase64, encodeBase64, type SchemaTypes } from "@pothos/core";
import { decodeGlobalID, resolveNodes } from "@pothos/plugin-relay";
import type { StandardSchemaV1 } from "@pothos/plugin-validation";
import { isObjectType, type GraphQLResolveInfo } from "graphql";
import { ValidationError } from "../errors.ts";

/**
 * Relay's global ids and cursors, hardened in one place (the builder's relay options): no id or
 * cursor a client sends can reach Prisma unchecked, so none of them is ever an internal error.
 *
 * Every Node type and every connection cursor in this schema is an Int primary key (a PostgreSQL
 * integer); a new Node or connection keyed otherwise must widen `isDatabaseId`.
 */

/** A positive PostgreSQL integer, written canonically (no sign, no leading zero). */
function isDatabaseId(text: string): boolean {
  return /^[1-9]\d{0,9}$/.test(text) && Number(text) <= 2_147_483_647;
}

type GlobalID = { typename: string; id: string };

/** No type is named "": a malformed id decodes to it and then loads as null like any unknown id. */
const UNDECODABLE: GlobalID = { typename: "", id: "" };

/** Pothos's decoder, except that a malformed id is not an error (it would fail all of `nodes`). */
export function decodeGlobalIDOrNothing(globalID: string): GlobalID {
  try {
    return decodeGlobalID(globalID);
  } catch {
    return UNDECODABLE;
  }
}

/**
 * node(id) and each entry of nodes(ids): the object, or null when the id is malformed, names no
 * Node type, or finds no row the caller may see. Foreign rows are filtered by each type's
 * findUnique (merchant and mode), so they are indistinguishable from missing ones.
 */
export function loadNodeOrNull<Types extends SchemaTypes>(
  builder: PothosSchemaTypes.SchemaBuilder<Types>,
  context: object,
  info: GraphQLResolveInfo,
  globalID: GlobalID,
): Promise<unknown> | null {
  const type = info.schema.getType(globalID.typename);
  const isNode = isObjectType(type) && type.getInterfaces().some((i) => i.name === "Node");
  if (!isNode || !isDatabaseId(globalID.id)) return null;
  return resolveNodes(builder, context, info, [globalID]).then(
    ([node]) => node ?? null,
    (error: unknown) => {
      // prismaNode loads with findUniqueOrThrow: "no such row" (P2025) is simply not found.
      if ((error as { code?: unknown })?.code === "P2025") return null;
      throw error;
    },
  );
}

/**
 * A cursor this gateway issued, base64 of Pothos's "GPC:N:<id>" (an Int id) or "GPC:I:<id>" (a BigInt id, the
 * ledger's balance transactions), as the canonical "GPC:N:<id>" every connection reads (Prisma takes a number
 * for a BigInt id too); null when it is not one. Ids stay within a PostgreSQL integer either way.
 */
function idCursor(cursor: string): string | null {
  if (cursor.length > 64) return null;
  try {
    const match = /^GPC:[NI]:(\d+)$/.exec(decodeBase64(cursor));
    return match !== null && isDatabaseId(match[1]!) ? encodeBase64(`GPC:N:${match[1]}`) : null;
  } catch {
    return null;
  }
}

/** A hand-rolled Standard Schema (what the validation plugin takes) for `before`/`after`. */
export function cursorArg(): StandardSchemaV1<string | null | undefined> {
  return {
    "~standard": {
      version: 1,
      vendor: "gateway",
      validate: (value) => {
        if (value == null) return { value: value as null | undefined };
        const canonical = typeof value === "string" ? idCursor(value) : null;
        return canonical !== null ? { value: canonical } : { issues: [{ message: "is not a valid cursor; pass a cursor from pageInfo or an edge" }] };
      },
    },
  };
}

/** `first`/`last`: Pothos refuses a negative size too, but untyped; this makes it validation_failed. */
export function pageSizeArg(): StandardSchemaV1<number | null | undefined> {
  return {
    "~standard": {
      version: 1,
      vendor: "gateway",
      validate: (value) =>
        value == null || (typeof value === "number" && Number.isInteger(value) && value >= 0)
          ? { value: value as number | null | undefined }
          : { issues: [{ message: "must be a non-negative integer" }] },
    },
  };
}

/**
 * The validation plugin's failures as our ValidationError, naming the argument (e.g. "after"), so
 * they render as validation_failed like every other bad input.
 */
export function toValidationError(failure: StandardSchemaV1.FailureResult): Error {
  const issue = failure.issues[0];
  const field = issue?.path?.map((p) => String(typeof p === "object" ? p.key : p)).join(".") || "input";
  return new ValidationError(field, issue?.message ?? "is invalid");
}
