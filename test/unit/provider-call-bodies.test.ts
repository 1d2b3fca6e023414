import { describe, expect, it } from "vitest";
import { BODY_LIMIT_BYTES, boundedBody } from "../../src/modules/provider-calls/service.ts";

/** Bodies on record are bounded (16 KiB of UTF-8) and storable (no NUL, which PostgreSQL's text refuses). */
describe("a provider call's body on record", () => {
  it("is kept whole up to the limit, and cut at a character boundary past it, marked", () => {
    expect(boundedBody(null)).toBeNull();
    const exact = "a".repeat(BODY_LIMIT_BYTES);
    expect(boundedBody(exact)).toBe(exact);
    const long = "€".repeat(BODY_LIMIT_BYTES); // 3 bytes each
    const cut = boundedBody(long)!;
    expect(cut.endsWith("…[truncated]")).toBe(true);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(BODY_LIMIT_BYTES);
    expect(cut.replace("…[truncated]", "")).toMatch(/^€+$/);
  });

  it("loses its NUL characters", () => {
    expect(boundedBody('{"a":"x\0y"}')).toBe('{"a":"xy"}');
  });
});
