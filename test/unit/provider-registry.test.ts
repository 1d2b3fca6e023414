import { describe, expect, it } from "vitest";
import { isTestProvider, listedProviderNames, providerNames, testProviderName } from "../../src/providers/registry.ts";

/** What core files ask the registry instead of naming providers (channels, the OpenAPI document, the demo, the CLI). */
describe("the provider registry", () => {
  it("lists every provider once, test providers first, then the real ones alphabetically", () => {
    expect([...listedProviderNames].sort()).toEqual([...providerNames].sort());
    const test = listedProviderNames.filter(isTestProvider);
    const real = listedProviderNames.filter((name) => !isTestProvider(name));
    expect(test.length).toBeGreaterThan(0);
    expect(listedProviderNames).toEqual([...test, ...[...real].sort((a, b) => a.localeCompare(b))]);
  });

  it("names a test provider for the demo and the CLI's triggers, and no provider for an unknown name", () => {
    expect(isTestProvider(testProviderName)).toBe(true);
    expect(isTestProvider("no-such-provider")).toBe(false);
    expect(isTestProvider("__proto__")).toBe(false);
  });
});
