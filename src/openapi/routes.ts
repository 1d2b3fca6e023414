import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import type { FastifyInstance } from "fastify";
import type { OpenApiDocument } from "./document.ts";

/** Redoc's own scripts and inline styles, its search worker from a blob: nothing from another host. */
const DOCS_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; worker-src blob:; connect-src 'self'; frame-ancestors 'none'";

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Payment gateway API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="reference"></div>
<script src="/docs/redoc.standalone.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// A separate file rather than an inline script, so the CSP needs no 'unsafe-inline' for scripts.
const INIT_SCRIPT = `Redoc.init("/openapi.json", { hideDownloadButton: false, expandResponses: "200,201", theme: { typography: { fontFamily: "system-ui, sans-serif", headings: { fontFamily: "system-ui, sans-serif" } } } }, document.getElementById("reference"));\n`;

/**
 * GET /openapi.json (the document, built once from the routes at start) and GET /docs, an interactive
 * reference (Redoc's standalone bundle, served from node_modules): no CDN and no web fonts, so it
 * works on a machine with no internet. Neither needs a key: the document describes, it holds no data.
 */
export function registerOpenApiRoutes(app: FastifyInstance, openApiDocument: OpenApiDocument) {
  const document = JSON.stringify(openApiDocument);
  const redocPath = createRequire(import.meta.url).resolve("redoc/bundles/redoc.standalone.js");
  let redoc: Promise<string> | undefined;
  const open = { config: { auth: "none", rateLimit: "none" } } as const;

  app.get("/openapi.json", open, async (_request, reply) => reply.header("cache-control", "public, max-age=300").type("application/json; charset=utf-8").send(document));
  app.get("/docs", open, async (_request, reply) => reply.header("content-security-policy", DOCS_CSP).type("text/html; charset=utf-8").send(DOCS_PAGE));
  app.get("/docs/init.js", open, async (_request, reply) => reply.type("text/javascript; charset=utf-8").send(INIT_SCRIPT));
  app.get("/docs/redoc.standalone.js", open, async (_request, reply) => {
    // The bundle's one outside address, the attribution logo, becomes nothing: the page loads from this host alone.
    redoc ??= readFile(redocPath, "utf8").then((code) => code.replaceAll("https://cdn.redoc.ly/redoc/logo-mini.svg", "data:,"));
    return reply.header("cache-control", "public, max-age=86400").type("text/javascript; charset=utf-8").send(await redoc);
  });
}
