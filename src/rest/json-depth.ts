import type { FastifyInstance } from "fastify";
import { GatewayError } from "../errors.ts";

/**
 * How deeply a JSON body may nest arrays and objects. No request of the API needs more than a few levels
 * (metadata and a channel's config are the deepest); code that walks a parsed body recursively (the
 * Idempotency-Key fingerprint, text checks, JSON.stringify) would overflow the stack on thousands.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether JSON text nests deeper than `max`: one linear pass over the raw text counting [ and { outside
 * strings, so nothing recursive ever runs on such a body. Text that is not JSON at all is left for the parser.
 */
export function jsonNestedDeeperThan(text: string, max = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

export function tooDeepError(): GatewayError {
  return new GatewayError("validation_failed", `The JSON body nests arrays or objects deeper than ${MAX_JSON_DEPTH} levels`);
}

/** Throws the catalogue's 400 when a JSON body nests deeper than MAX_JSON_DEPTH. */
export function assertJsonDepth(text: string): void {
  if (jsonNestedDeeperThan(text)) throw tooDeepError();
}

/**
 * Every application/json body of the app (REST, /v1, /graphql, the checkout's JSON) goes through Fastify's own
 * JSON parser (same errors, same __proto__ and constructor refusals) behind the depth check. Registered on the
 * root before any plugin, so every scope inherits it; the callbacks' raw bodies are checked in inbound-json.ts.
 */
export function refuseDeepJson(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    if (jsonNestedDeeperThan(body as string)) {
      done(tooDeepError(), undefined);
      return;
    }
    parse(request, body as string, done);
  });
}
