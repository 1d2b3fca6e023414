import { ValidationError } from "./errors.ts";

/** Optional free text: trimmed, empty means absent (null), longer than `max` is a 400 naming the field. */
export function optionalText(value: string | null | undefined, field: string, max: number): string | null {
  const text = value?.trim();
  if (!text) return null;
  if (text.length > max) throw new ValidationError(field, `must be at most ${max} characters`);
  return text;
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

/**
 * The one check every client-sent text passes before it reaches a service or the database (REST bodies,
 * query strings and path parameters, GraphQL variables and literals, provider callbacks): a string, or
 * an object key, with a control character, a lone surrogate or over MAX_TEXT_LENGTH is a ValidationError naming where it
 * is (`config.secret_key`, `input.description`, `Body.stkCallback.CheckoutRequestID`). Null when all is fine.
 */
export function unsafeTextIn(value: unknown, field: string, depth = 0): ValidationError | null {
  if (typeof value === "string") {
    if (CONTROL_CHARACTERS.test(value)) return new ValidationError(field, "must not contain control characters such as NUL (\\u0000)");
    if (LONE_SURROGATE.test(value)) return new ValidationError(field, "must be valid Unicode: a lone UTF-16 surrogate (such as \\ud800) is not a character");
    if (value.length > MAX_TEXT_LENGTH) return new ValidationError(field, `must be at most ${MAX_TEXT_LENGTH} characters`);
    return null;
  }
  if (!value || typeof value !== "object") return null;
  // Unchecked text could still reach the database (a C2B body is kept whole for its forward): refuse, don't skip.
  if (depth > MAX_DEPTH) return new ValidationError(field, `must not be nested more than ${MAX_DEPTH} levels deep`);
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = unsafeTextIn(item, `${field}[${i}]`, depth + 1);
      if (found) return found;
    }
    return null;
  }
  for (const [key, item] of Object.entries(value)) {
    const path = field ? `${field}.${key}` : key;
    const badKey = unsafeTextIn(key, path, depth + 1);
    if (badKey) return badKey;
    const found = unsafeTextIn(item, path, depth + 1);
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
