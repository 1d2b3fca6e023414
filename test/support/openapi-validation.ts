import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { buildOpenApiDocument } from "../../src/app/openapi.ts";
import { openApiPath } from "../../src/openapi/document.ts";

/**
 * Every REST answer a test gateway gives is checked against the OpenAPI document's schema for its route and
 * status (ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses), so the document is proven by the whole suite.
 * An answer whose route and status the document does not list is a violation too.
 */
type Validate = ((data: unknown) => boolean) & { errors?: { instancePath: string; message?: string }[] | null };

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, "~0").replace(/\//g, "~1")).join("/");

export function createResponseValidator() {
  const document = buildOpenApiDocument() as unknown as { paths: Record<string, Record<string, { responses: Record<string, { $ref?: string; content?: unknown }> }>> };
  const Ajv = Ajv2020 as unknown as new (options: object) => { addSchema(schema: object, key: string): void; getSchema(ref: string): Validate | undefined };
  const ajv = new Ajv({ strict: false, allErrors: true });
  (addFormats as unknown as (ajv: object) => void)(ajv);
  ajv.addSchema(document, "doc");
  const cache = new Map<string, Validate | null>();

  function validatorFor(method: string, route: string, status: number): Validate | null {
    const key = `${method} ${route} ${status}`;
    if (cache.has(key)) return cache.get(key)!;
    const path = openApiPath(route);
    const responses = document.paths[path]?.[method.toLowerCase()]?.responses;
    let validate: Validate | null = null;
    if (responses) {
      const name = String(status) in responses ? String(status) : status >= 400 && "default" in responses ? "default" : null;
      if (name) {
        const response = responses[name]!;
        const base = response.$ref ? `doc${response.$ref}` : `doc#/${pointer("paths", path, method.toLowerCase(), "responses", name)}`;
        validate = ajv.getSchema(`${base}/content/application~1json/schema`) ?? null;
      }
    }
    cache.set(key, validate);
    return validate;
  }

  return {
    /** Why this answer contradicts the document; null when it matches; undefined when it is no REST answer (not checked). */
    check(method: string, route: string | undefined, status: number, payload: unknown): string | null | undefined {
      if (!route || !(route.startsWith("/api/") || route.startsWith("/v1/")) || (method !== "GET" && method !== "POST")) return undefined;
      if (!document.paths[openApiPath(route)]?.[method.toLowerCase()]) return `${method} ${route}: not in the OpenAPI document`;
      // A documented non-JSON answer (the CSV report) has no JSON body to check.
      const listed = document.paths[openApiPath(route)]![method.toLowerCase()]!.responses[String(status)] as { content?: Record<string, unknown> } | undefined;
      if (listed?.content && !("application/json" in listed.content)) return undefined;
      const validate = validatorFor(method, route, status);
      if (!validate) return `${method} ${route} answered ${status}, which the OpenAPI document does not list`;
      const text = typeof payload === "string" ? payload : Buffer.isBuffer(payload) ? payload.toString("utf8") : null;
      if (text === null) return undefined; // a stream: not a REST answer
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return `${method} ${route} ${status}: not JSON: ${text.slice(0, 200)}`;
      }
      if (validate(body)) return null;
      const errors = (validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
      return `${method} ${route} ${status}: ${errors} in ${text.slice(0, 300)}`;
    },
  };
}

export type ResponseValidator = ReturnType<typeof createResponseValidator>;
