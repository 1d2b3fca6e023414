/** A mistake in how the CLI was called: main.ts prints it with the usage text and exits 2. */
export class UsageError extends Error {}

export function required(values: Record<string, string | boolean | undefined>, name: string): string {
  const value = values[name];
  if (typeof value !== "string" || value.trim() === "") throw new UsageError(`--${name} is required`);
  return value;
}
