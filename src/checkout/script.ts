import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { buildSync } from "esbuild";

/** The page's script as TypeScript (src/checkout/browser/), and as `npm run build` leaves it bundled in dist/, which has no sources. */
const SOURCE = fileURLToPath(new URL("./browser/checkout.ts", import.meta.url));
export const CHECKOUT_SCRIPT_BUNDLE = fileURLToPath(new URL("./browser/checkout.bundle.js", import.meta.url));

/** The global the bundle defines; the page calls its startCheckout(data). */
export const CHECKOUT_SCRIPT_GLOBAL = "gatewayCheckout";

/**
 * Bundles the checkout page's browser script with esbuild, as the dashboard's is (src/dashboard/build.ts): one
 * minified IIFE that defines `gatewayCheckout.startCheckout`, small enough to inline in the page under its nonce.
 */
export function bundleCheckoutScript(): string {
  const { outputFiles } = buildSync({
    entryPoints: [SOURCE],
    bundle: true,
    minify: true,
    write: false,
    format: "iife",
    globalName: CHECKOUT_SCRIPT_GLOBAL,
    platform: "browser",
    target: "es2020",
    tsconfig: fileURLToPath(new URL("./browser/tsconfig.json", import.meta.url)),
    legalComments: "none",
    logLevel: "silent",
  });
  return outputFiles[0]!.text.trim();
}

let script: string | undefined;

/**
 * The bundled script, once per process: bundled from its source where the source is (npm start, the tests), so a
 * checkout never serves a stale build; read from the bundle `npm run build` wrote where it is not (dist/).
 */
export function checkoutScript(): string {
  script ??= existsSync(SOURCE) ? bundleCheckoutScript() : readFileSync(CHECKOUT_SCRIPT_BUNDLE, "utf8");
  return script;
}
