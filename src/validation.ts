import { z } from "zod";
import { ValidationError } from "./errors.ts";

/**
 * A service's input, parsed once at its door by its one zod schema. The first wrong field, in the order the schema
 * lists them, is the ValidationError's message: named as the API names it (a key `firstName` is `first_name`), or
 * by the issue's own `params.field` (a place inside a JSON value, `metadata.note`); every other wrong field is in its
 * `errors`, in the same order.
 */
export function parseInput<T extends z.ZodType>(schema: T, input: unknown): z.output<T> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  throw firstIssue(schema, parsed.error);
}

/** parseInput for a schema with an asynchronous step (a URL checked against the network rules). */
export async function parseInputAsync<T extends z.ZodType>(schema: T, input: unknown): Promise<z.output<T>> {
  const parsed = await schema.safeParseAsync(input ?? {});
  if (parsed.success) return parsed.data;
  throw firstIssue(schema, parsed.error);
}

/** One value by its schema, its first issue reported on `field` (the parse functions other modules call: parseAmount, ...). */
export function parseField<T extends z.ZodType>(schema: T, value: unknown, field: string): z.output<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new ValidationError(fieldNamedBy(issue) ?? field, issue.message);
}

/** The field a refusal names itself (refuse's `field`), if it does. */
function fieldNamedBy(issue: z.core.$ZodIssue): string | undefined {
  const named = (issue as { params?: { field?: unknown } }).params?.field;
  return typeof named === "string" ? named : undefined;
}

const snakeCase = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * Every issue as a field and its problem, the schema's earliest field first (an object-level rule's issue is ranked
 * by the field it names); one problem per field, its first.
 */
function firstIssue(schema: z.ZodType, error: z.ZodError): ValidationError {
  const keys = schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
  const rank = (issue: z.core.$ZodIssue) => {
    const at = keys.indexOf(String(issue.path[0]));
    return at < 0 ? keys.length : at;
  };
  const fieldOf = (issue: z.core.$ZodIssue) =>
    fieldNamedBy(issue) ?? (issue.path.map((key) => (typeof key === "number" ? `[${key}]` : snakeCase(String(key)))).join(".").replace(/\.\[/g, "[") || "input");
  // A stable sort: issues of one field keep zod's order.
  const problems = error.issues
    .map((issue, index) => ({ issue, index }))
    .sort((a, b) => rank(a.issue) - rank(b.issue) || a.index - b.index)
    .map(({ issue }) => ({ field: fieldOf(issue), message: issue.message }));
  const [first, ...others] = problems;
  return new ValidationError(first!.field, first!.message, others);
}

/** Adds `problem` as the issue of the value being parsed (or of `field`, a place inside it); z.NEVER for a transform to return. */
export function refuse(ctx: z.core.$RefinementCtx, problem: string, field?: string): never {
  ctx.addIssue({ code: "custom", message: problem, ...(field === undefined ? {} : { params: { field } }) });
  return z.NEVER;
}

const optionalTextSchemas = new Map<number, z.ZodType<string | null>>();
/**
 * Optional free text: trimmed, empty or absent means null; longer than `max`, or text no field takes (unsafeText),
 * is refused.
 */
export function optionalTextSchema(max: number): z.ZodType<string | null, string | null | undefined> {
  let schema = optionalTextSchemas.get(max);
  if (!schema) {
    schema = z
      .string({ error: "must be text" })
      .nullish()
      .transform((value, ctx) => {
        const text = value?.trim();
        if (!text) return null;
        if (text.length > max) return refuse(ctx, `must be at most ${max} characters`);
        const unsafe = unsafeText(text);
        return unsafe ? refuse(ctx, unsafe) : text;
      });
    optionalTextSchemas.set(max, schema);
  }
  return schema as z.ZodType<string | null, string | null | undefined>;
}

/** Optional free text: trimmed, empty means absent (null), longer than `max` is a 400 naming the field. */
export function optionalText(value: string | null | undefined, field: string, max: number): string | null {
  return parseField(optionalTextSchema(max), value, field);
}

/** C0 control characters other than tab, line feed and carriage return, and DEL: never meaningful in a field, and NUL cannot be stored. */
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/;
/**
 * Half of a UTF-16 surrogate pair without the other half (JSON can carry one as "\ud800"): not a character,
 * so it has no UTF-8 form. Drivers write it as U+FFFD or fail, so the stored text would differ from what was sent.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** No text value the gateway takes is longer (fields have tighter bounds of their own; bodies are capped at 1 MB). */
export const MAX_TEXT_LENGTH = 10_000;
/** No input the gateway takes nests deeper (metadata stops at 10 levels). */
const MAX_DEPTH = 20;

/** What is wrong with one text value (a control character, a lone surrogate, over MAX_TEXT_LENGTH); null when nothing is. */
export function unsafeText(value: string): string | null {
  if (CONTROL_CHARACTERS.test(value)) return "must not contain control characters such as NUL (\\u0000)";
  if (LONE_SURROGATE.test(value)) return "must be valid Unicode: a lone UTF-16 surrogate (such as \\ud800) is not a character";
  if (value.length > MAX_TEXT_LENGTH) return `must be at most ${MAX_TEXT_LENGTH} characters`;
  return null;
}

/**
 * The one check every client-sent text passes before it reaches a service or the database (REST bodies,
 * query strings and path parameters, GraphQL variables and literals, provider callbacks): a string, or
 * an object key, with a control character, a lone surrogate or over MAX_TEXT_LENGTH is a ValidationError naming where it
 * is (`config.secret_key`, `input.description`, `Body.stkCallback.CheckoutRequestID`). Null when all is fine.
 */
export function unsafeTextIn(value: unknown, field: string): ValidationError | null {
  const found = unsafeTextAt(value, field);
  return found ? new ValidationError(found.field, found.problem) : null;
}

/** unsafeTextIn's finding as where and what (for a schema to report as its issue). */
export function unsafeTextAt(value: unknown, field: string, depth = 0): { field: string; problem: string } | null {
  if (typeof value === "string") {
    const problem = unsafeText(value);
    return problem ? { field, problem } : null;
  }
  if (!value || typeof value !== "object") return null;
  // Unchecked text could still reach the database (a C2B body is kept whole for its forward): refuse, don't skip.
  if (depth > MAX_DEPTH) return { field, problem: `must not be nested more than ${MAX_DEPTH} levels deep` };
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = unsafeTextAt(item, `${field}[${i}]`, depth + 1);
      if (found) return found;
    }
    return null;
  }
  for (const [key, item] of Object.entries(value)) {
    const path = field ? `${field}.${key}` : key;
    const found = unsafeTextAt(key, path, depth + 1) ?? unsafeTextAt(item, path, depth + 1);
    if (found) return found;
  }
  return null;
}

/** Throws the ValidationError of unsafeTextIn for each named part of a request (body, query, params). */
export function assertSafeText(parts: object): void {
  for (const part of Object.values(parts)) {
    const found = unsafeTextIn(part, "");
    if (found) throw found;
  }
}
