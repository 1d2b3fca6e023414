import { cp, mkdir, rm, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { bundleCheckoutScript } from "../src/checkout/script.ts";
import { buildDashboard } from "../src/dashboard/build.ts";

/**
 * `npm run build`, after tsc has compiled src/ into dist/: the files tsc does not copy. dist/ mirrors src/,
 * so paths the code resolves from its own location (certificates, the dashboard's and the checkout's bundles, ../../prisma,
 * ../../schema.graphql) hold in both.
 */
const root = fileURLToPath(new URL("..", import.meta.url));
const dist = `${root}dist`;

await cp(`${root}src/providers/mpesa/certs`, `${dist}/providers/mpesa/certs`, { recursive: true });
await rm(`${dist}/dashboard/dist`, { recursive: true, force: true });
await buildDashboard(`${dist}/dashboard/dist`);
// dist/ has no TypeScript sources: the checkout page reads its script from here (src/checkout/script.ts).
await mkdir(`${dist}/checkout/browser`, { recursive: true });
await writeFile(`${dist}/checkout/browser/checkout.bundle.js`, bundleCheckoutScript());
console.log(`built into ${dist}: node dist/main.js starts it`);
