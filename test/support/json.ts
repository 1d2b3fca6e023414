/** A body parsed as JSON, or undefined when it is not JSON (an HTML error page, an empty body, a fuzzed reply). */
export function parseJsonOrUndefined(text: string): any {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}
