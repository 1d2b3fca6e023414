import { createHash } from "node:crypto";
import { existsSync, readdirSync, statSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { DASHBOARD_DIST_DIR, DASHBOARD_SOURCE_DIR, buildDashboard } from "./build.ts";

/**
 * The dashboard talks to this gateway only: its own scripts and styles, its API and its WebSocket. Inline style
 * attributes (never style elements or scripts) apply, for the test inbox's e-mails, whose HTML is styled inline as
 * e-mail must be and is shown in a sandboxed frame that inherits this policy.
 */
export const DASHBOARD_CSP =
  "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self'; style-src-attr 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'";

const ASSETS: Record<string, string> = { "app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8" };

function newestSourceChange(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSourceChange(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Whether dist/ is missing, or older than the app's sources (a checkout that changed them). */
function needsBuild(): boolean {
  const index = join(DASHBOARD_DIST_DIR, "index.html");
  if (!existsSync(index)) return true;
  return existsSync(DASHBOARD_SOURCE_DIR) && newestSourceChange(DASHBOARD_SOURCE_DIR) > statSync(index).mtimeMs;
}

let built: Promise<void> | undefined;

/** Builds dist/ when needed, once per process (postinstall normally has built it already). */
function ensureBuilt(app: FastifyInstance): Promise<void> {
  built ??= (async () => {
    if (!needsBuild()) return;
    try {
      await buildDashboard();
    } catch (error) {
      // A read-only install with a built dist/ keeps serving it; without one there is nothing to serve.
      if (!existsSync(join(DASHBOARD_DIST_DIR, "index.html"))) throw error;
      app.log.warn({ err: error }, "dashboard rebuild failed; serving the existing build");
    }
  })();
  return built;
}

interface Asset {
  body: Buffer;
  etag: string;
}

async function load(file: string): Promise<Asset> {
  const body = await readFile(join(DASHBOARD_DIST_DIR, file));
  return { body, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"` };
}

/**
 * GET /dashboard and every client route below it answer the app's index.html (the app routes itself);
 * /dashboard/assets/app.js and app.css are the bundle, cached for a year when asked for with the
 * build's version (index.html names them with ?v=<hash>), revalidated otherwise.
 */
export async function registerDashboardRoutes(app: FastifyInstance): Promise<void> {
  await ensureBuilt(app);
  const html = await load("index.html");
  const assets = new Map<string, Asset>();
  for (const file of Object.keys(ASSETS)) assets.set(file, await load(file));
  const version = /app\.js\?v=([0-9a-f]+)/.exec(html.body.toString("utf8"))?.[1];

  const notModified = (request: FastifyRequest, reply: FastifyReply, asset: Asset) => {
    reply.header("etag", asset.etag);
    return request.headers["if-none-match"] === asset.etag;
  };

  const sendIndex = async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.url.startsWith("/dashboard/assets/")) return reply.callNotFound();
    reply
      .header("content-security-policy", DASHBOARD_CSP)
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .header("x-frame-options", "DENY")
      .header("cache-control", "no-cache");
    if (notModified(request, reply, html)) return reply.code(304).send();
    return reply.type("text/html; charset=utf-8").send(html.body);
  };

  // The app's page and assets hold no data: it signs in and calls /v1 and /graphql like any client.
  const open = { config: { auth: "none", rateLimit: "none" } } as const;
  app.get("/dashboard", open, sendIndex);
  app.get("/dashboard/", open, sendIndex);
  app.get("/dashboard/*", open, sendIndex);

  app.get<{ Params: { file: string }; Querystring: { v?: string } }>("/dashboard/assets/:file", open, async (request, reply) => {
    const asset = assets.get(request.params.file);
    if (!asset) return reply.callNotFound();
    const current = version !== undefined && request.query.v === version;
    reply
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .header("cache-control", current ? "public, max-age=31536000, immutable" : "no-cache");
    if (notModified(request, reply, asset)) return reply.code(304).send();
    return reply.type(ASSETS[request.params.file]!).send(asset.body);
  });
}
