import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { allows, authorizationTableMarkdown, OPERATIONS, PERMISSIONS, type Permission } from "../../src/authorization.ts";
import type { Principal } from "../../src/auth.ts";

const principal = (kind: "key" | "user", role: Principal["role"], mode: Principal["mode"]): Principal => ({
  merchantId: 1,
  mode,
  role,
  userId: kind === "user" ? 7 : null,
  keyId: kind === "key" ? 3 : null,
  keyPrefix: kind === "key" ? "sk_test_x" : null,
});

describe("the authorization table", () => {
  it("docs/dashboard.md shows exactly the table the schema's scopes come from", () => {
    const doc = readFileSync(new URL("../../docs/dashboard.md", import.meta.url), "utf8");
    const block = /<!-- authorization-table[^>]*-->\n([\s\S]*?)\n<!-- \/authorization-table -->/.exec(doc);
    expect(block, "docs/dashboard.md's authorization-table block").not.toBeNull();
    expect(block![1]).toBe(authorizationTableMarkdown());
  });

  it("a key never manages keys, the team or the brand, in either mode, whatever its role", () => {
    for (const mode of ["test", "live"] as const) {
      for (const role of ["owner", "developer", "viewer"] as const) {
        for (const permission of ["api_keys", "signed_in_owner", "own_account"] as Permission[]) expect(allows(principal("key", role, mode), permission)).toBe(false);
      }
      expect(allows(principal("user", "owner", mode), "signed_in_owner")).toBe(true);
    }
    // Live credentials: a signed-in owner only; test credentials: whoever writes test data.
    expect(allows(principal("key", "owner", "live"), "channel_credentials")).toBe(false);
    expect(allows(principal("key", "owner", "test"), "channel_credentials")).toBe(true);
    expect(allows(principal("user", "owner", "live"), "channel_credentials")).toBe(true);
    expect(allows(principal("user", "developer", "live"), "channel_credentials")).toBe(false);
  });

  it("nothing a role cannot do in test mode is allowed to it in live mode (live is never looser)", () => {
    for (const rule of Object.values(PERMISSIONS)) {
      for (const modes of Object.values(rule.allows)) if (modes?.includes("live")) expect(modes).toContain("test");
    }
  });

  it("every operation names a permission that exists, and no principal is given anything by a null principal", () => {
    for (const fields of Object.values(OPERATIONS)) for (const permission of Object.values(fields)) expect(Object.keys(PERMISSIONS)).toContain(permission);
    for (const permission of Object.keys(PERMISSIONS) as Permission[]) expect(allows(null, permission)).toBe(false);
  });
});
