import { webhookBody } from "./payload.ts";
import { WEBHOOK_FIXED_HEADERS } from "./signing.ts";

/**
 * What the deliveries list shows of each attempt's exchange: the request rebuilt from the event (never the
 * secret nor the signature), and an excerpt of the endpoint's answer kept by the delivery job.
 */

/** Characters of an answer kept. */
export const RESPONSE_EXCERPT_CHARS = 2048;
/** Bytes of an answer read: 2,048 characters are at most 4 bytes each; the rest is never buffered. */
export const RESPONSE_READ_BYTES = RESPONSE_EXCERPT_CHARS * 4;
const MAX_HEADERS = 50;
const MAX_HEADER_VALUE_CHARS = 512;
/** Headers that may carry a credential or a session: never kept. */
const SENSITIVE_HEADER = /cookie|authori[sz]ation|authenticat|token|secret|session|api[-_]?key|password|signature/i;
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

/** The first 2,048 characters of an answer (already decoded as UTF-8 with replacement), control characters but \n and \t removed. */
export function responseExcerpt(body: string): string {
  const cleaned = body.replace(CONTROL_CHARACTERS, "");
  let excerpt = cleaned.slice(0, RESPONSE_EXCERPT_CHARS);
  // Never end on half a surrogate pair.
  if (/[\ud800-\udbff]$/.test(excerpt)) excerpt = excerpt.slice(0, -1);
  return excerpt;
}

/** An answer's headers minus cookie/authorization-like ones, bounded in number and length. */
export function responseHeaders(headers: Record<string, string>): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers).slice(0, MAX_HEADERS)) {
    if (SENSITIVE_HEADER.test(name)) continue;
    kept[name] = value.replace(CONTROL_CHARACTERS, "").slice(0, MAX_HEADER_VALUE_CHARS);
  }
  return kept;
}

export interface HeaderPair {
  name: string;
  value: string;
}

export const headerPairs = (headers: Record<string, string>): HeaderPair[] => Object.entries(headers).map(([name, value]) => ({ name, value }));

/** The request every attempt of a delivery sends, as a merchant may see it: the body and headers, the signature's value withheld. */
export function deliveryRequest(url: string, event: { id: bigint; type: string; createdAt: Date; payload: unknown }) {
  return {
    url,
    headers: headerPairs({
      ...WEBHOOK_FIXED_HEADERS,
      "webhook-id": event.id.toString(),
      "webhook-timestamp": "(unix seconds of each attempt)",
      "webhook-signature": "(signed; not shown)",
    }),
    body: webhookBody(event),
  };
}
