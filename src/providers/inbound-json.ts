import { GatewayError } from "../errors.ts";
import { assertJsonDepth } from "../rest/json-depth.ts";

/** Keys that could reach an object's prototype once a parsed body is spread or merged: refused, as Fastify's own parser does. */
const SUSPECT_KEY = /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"|"(?:c|\\u0063)(?:o|\\u006[Ff])(?:n|\\u006[Ee])(?:s|\\u0073)(?:t|\\u0074)(?:r|\\u0072)(?:u|\\u0075)(?:c|\\u0063)(?:t|\\u0074)(?:o|\\u006[Ff])(?:r|\\u0072)"/;

function hasPoisonedKey(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const node = pending.pop();
    if (!node || typeof node !== "object") continue;
    if (Object.hasOwn(node, "__proto__")) return true;
    const ctor = (node as Record<string, unknown>).constructor;
    if (Object.hasOwn(node, "constructor") && ctor && typeof ctor === "object" && Object.hasOwn(ctor, "prototype")) return true;
    pending.push(...Object.values(node));
  }
  return false;
}

/**
 * A JSON callback body read from its raw bytes exactly as the gateway's JSON routes read theirs
 * (Fastify's JSON parser): a Content-Type other than application/json is a 415, an empty or malformed
 * body (or one carrying `__proto__` / `constructor.prototype`) a 400 malformed_json, one nested deeper than
 * MAX_JSON_DEPTH a 400 validation_failed, and no body at all
 * with no Content-Type is `undefined`, left for the payload's own parser to refuse.
 */
export function readJsonBody(rawBody: Buffer, contentType: string | undefined): unknown {
  if (contentType === undefined) {
    if (rawBody.length === 0) return undefined;
    throw new GatewayError("unsupported_media_type");
  }
  const mediaType = contentType.split(";", 1)[0]!.trim().toLowerCase();
  if (mediaType !== "application/json") throw new GatewayError("unsupported_media_type");
  if (rawBody.length === 0) throw new GatewayError("malformed_json");
  let text = rawBody.toString("utf8");
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  // Before anything walks it: the C2B text checks and the forward to the merchant recurse through the body.
  assertJsonDepth(text);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new GatewayError("malformed_json");
  }
  if (SUSPECT_KEY.test(text) && hasPoisonedKey(parsed)) throw new GatewayError("malformed_json");
  return parsed;
}
