import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { configVariables, schemaDefault } from "../../src/config.ts";
import { CONFIG_DOC_PATH, configurationMarkdown } from "../../src/config-docs.ts";

describe("docs/configuration.md", () => {
  it("is exactly what `npm run docs:config` writes from the config schema (run it after changing src/config.ts)", () => {
    expect(readFileSync(CONFIG_DOC_PATH, "utf8")).toBe(configurationMarkdown());
  });

  it("names every variable once, each with a default and a description", () => {
    const names = configVariables().map((v) => v.name);
    expect(new Set(names).size).toBe(names.length);
    for (const v of configVariables()) {
      expect(v.default.trim(), v.name).not.toBe("");
      expect(v.description.trim().length, v.name).toBeGreaterThan(5);
    }
  });

  it("a default written as one literal is the schema's own default", () => {
    let checked = 0;
    for (const v of configVariables()) {
      const literal = /^`([^`]+)`$/.exec(v.default)?.[1];
      const actual = schemaDefault(v.name);
      if (literal === undefined || actual === undefined) continue;
      expect(String(actual), v.name).toBe(literal);
      checked++;
    }
    // Most defaults are plain numbers the schema applies itself; the rest (on/off by NODE_ENV, derived) are prose.
    expect(checked).toBeGreaterThan(40);
  });
});
