import { ValidationError } from "../errors.ts";
import { parseStatus } from "../filters.ts";

/**
 * Legacy query strings arrive as text; these turn them into typed GraphQL variables, or a 400 that
 * names the parameter. Semantic rules (ranges, enums) stay in the services so GraphQL shares them.
 */
function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw new ValidationError(name, "must be given once");
  return String(value);
}

export function intParam(query: Record<string, unknown>, name: string): number | undefined {
  const value = single(query, name);
  if (value === undefined || value === "") return undefined;
  if (!/^-?\d{1,15}$/.test(value)) throw new ValidationError(name, "must be an integer");
  return Number(value);
}

export function boolParam(query: Record<string, unknown>, name: string): boolean | undefined {
  const value = single(query, name);
  if (value === undefined || value === "") return undefined;
  if (value === "true") return true;
  if (value === "false") return false;
  throw new ValidationError(name, "must be true or false");
}

export function stringParam(query: Record<string, unknown>, name: string): string | undefined {
  const value = single(query, name);
  return value === undefined || value === "" ? undefined : value;
}

/** A JSON body field that must be an integer when present (amount, payment_channel_id, ...). */
export function intField(body: Record<string, unknown>, name: string): number | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isSafeInteger(value)) throw new ValidationError(name, "must be an integer");
  return value;
}

/** A JSON body field that must be a string when present. */
export function stringField(body: Record<string, unknown>, name: string): string | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new ValidationError(name, "must be a string");
  return value;
}

/**
 * JSON body fields under their GraphQL input names, as sent, for GraphQL to check their types: one that does not
 * coerce (or a required one missing) is the 400 naming the REST field (coercionError in route-table.ts). A null is
 * left out, as if not sent, as the typed readers above read it.
 */
export function bodyFields(body: Record<string, unknown>, names: Record<string, string>): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [input, rest] of Object.entries(names)) if (body[rest] !== undefined && body[rest] !== null) fields[input] = body[rest];
  return fields;
}

/** For fields the GraphQL input marks required: a missing value is a 400 naming the field, not a coercion error. */
export function required<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw new ValidationError(name, "is required");
  return value;
}

/** A JSON body field that must be a list of strings when present (e.g. webhook event types). */
export function stringListField(body: Record<string, unknown>, name: string): string[] | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) throw new ValidationError(name, "must be a list of strings");
  return value as string[];
}

/** A JSON body field that must be true or false when present. */
export function boolField(body: Record<string, unknown>, name: string): boolean | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") throw new ValidationError(name, "must be true or false");
  return value;
}

/** The variables every paged list takes from its query string (see pageQuery in openapi/schemas.ts). */
export function pageVariables(query: Record<string, unknown>) {
  const status = stringParam(query, "status");
  return {
    page: intParam(query, "page"),
    limit: intParam(query, "limit"),
    status: status === undefined ? undefined : parseStatus(status),
    dateFrom: stringParam(query, "date_from"),
    dateTo: stringParam(query, "date_to"),
  };
}
