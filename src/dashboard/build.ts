import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
export const DASHBOARD_SOURCE_DIR = join(here, "app");
export const DASHBOARD_DIST_DIR = join(here, "dist");

function indexHtml(version: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/assets/app.css?v=${version}">
<script type="module" src="/dashboard/assets/app.js?v=${version}"></script>
</head>
<body>
<div id="app"></div>
<noscript>The dashboard needs JavaScript.</noscript>
</body>
</html>
`;
}

/**
 * Bundles the dashboard (Preact + graphql-ws, one JS and one CSS file) into outDir. Files are written
 * to a temporary directory and renamed into place one by one, index.html last, so a process serving
 * outDir while another builds never reads a half-written file.
 */
export async function buildDashboard(outDir = DASHBOARD_DIST_DIR): Promise<void> {
  const staging = join(dirname(outDir), `.dist-${process.pid}-${randomBytes(4).toString("hex")}`);
  try {
    await build({
      entryPoints: { app: join(DASHBOARD_SOURCE_DIR, "main.tsx") },
      outdir: staging,
      bundle: true,
      minify: true,
      sourcemap: false,
      format: "esm",
      platform: "browser",
      target: "es2020",
      jsx: "automatic",
      jsxImportSource: "preact",
      tsconfig: join(DASHBOARD_SOURCE_DIR, "tsconfig.json"),
      legalComments: "none",
      logLevel: "silent",
      define: { "process.env.NODE_ENV": '"production"' },
    });
    const hash = createHash("sha256");
    for (const file of ["app.js", "app.css"]) hash.update(await readFile(join(staging, file)));
    await writeFile(join(staging, "index.html"), indexHtml(hash.digest("hex").slice(0, 12)));
    await mkdir(outDir, { recursive: true });
    for (const file of ["app.js", "app.css", "index.html"]) await rename(join(staging, file), join(outDir, file));
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = Date.now();
  await buildDashboard();
  console.log(`dashboard built into ${DASHBOARD_DIST_DIR} in ${Date.now() - started} ms`);
}
