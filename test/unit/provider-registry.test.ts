import { describe, expect, it } from "vitest";
import { isTestOnlyProvider, listedProviderNames, providerNames, testProviderName } from "../../src/providers/registry.ts";

/** What core files ask the registry instead of naming providers (channels, the OpenAPI document, the demo, the CLI). */
describe("the provider registry", () => {
  it("lists every provider once, test-only ones first, then the real ones alphabetically", () => {
    expect([...listedProviderNames].sort()).toEqual([...providerNames].sort());
    const testOnly = listedProviderNames.filter(isTestOnlyProvider);
    const real = listedProviderNames.filter((name) => !isTestOnlyProvider(name));
    expect(testOnly.length).toBeGreaterThan(0);
    expect(listedProviderNames).toEqual([...testOnly, ...[...real].sort((a, b) => a.localeCompare(b))]);
  });

  it("names a test-only provider for the demo and the CLI's triggers, and no provider for an unknown name", () => {
    expect(isTestOnlyProvider(testProviderName)).toBe(true);
    expect(isTestOnlyProvider("no-such-provider")).toBe(false);
    expect(isTestOnlyProvider("__proto__")).toBe(false);
  });
});
