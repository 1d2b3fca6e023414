import { ValidationError } from "./errors.ts";

/** Optional free text: trimmed, empty means absent (null), longer than `max` is a 400 naming the field. */
export function optionalText(value: string | null | undefined, field: string, max: number): string | null {
  const text = value?.trim();
  if (!text) return null;
  if (text.length > max) throw new ValidationError(field, `must be at most ${max} characters`);
  return text;
}
