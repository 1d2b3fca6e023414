import { afterEach, describe, expect, it } from "vitest";
import { hashPassword, setPasswordHashCost, unknownUserHash, verifyPassword } from "../../src/modules/users/passwords.ts";

describe("password hashing", () => {
  afterEach(() => setPasswordHashCost(15));

  it("uses scrypt N = 2^15, r = 8, p = 1 by default (the production parameters) and verifies only the right password", async () => {
    const hash = await hashPassword("correct horse battery");
    expect(hash).toMatch(/^scrypt\$32768\$8\$1\$[\w-]{22}\$[\w-]{43}$/);
    expect(await verifyPassword("correct horse battery", hash)).toBe(true);
    expect(await verifyPassword("correct horse batteryy", hash)).toBe(false);
    expect(await hashPassword("correct horse battery")).not.toBe(hash); // salted
  });

  it("a lower cost applies to new hashes only; old hashes still verify with the parameters stored in them", async () => {
    const production = await hashPassword("a long password");
    setPasswordHashCost(10);
    const cheap = await hashPassword("a long password");
    expect(cheap).toMatch(/^scrypt\$1024\$8\$1\$/);
    expect(await verifyPassword("a long password", cheap)).toBe(true);
    expect(await verifyPassword("a long password", production)).toBe(true);
    // The dummy hash for unknown e-mails follows the cost, so both paths still cost the same.
    expect(await unknownUserHash()).toMatch(/^scrypt\$1024\$/);
  });

  it("refuses a malformed stored hash instead of throwing", async () => {
    expect(await verifyPassword("x", "bcrypt$whatever")).toBe(false);
    expect(await verifyPassword("x", "")).toBe(false);
  });
});
