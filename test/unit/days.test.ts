import { describe, expect, it } from "vitest";
import type { Principal } from "../../src/auth.ts";
import { addDays, isTimeZone, localDay, localDayRange, localDayReader, localHour, startOfLocalDay } from "../../src/days.ts";
import { statusDateWhere } from "../../src/filters.ts";

/** Days in a time zone (src/days.ts) and the list filters built on them (src/filters.ts). */
const iso = (d: Date | undefined) => d?.toISOString();
const principal: Principal = { merchantId: 1, mode: "test", role: "owner", userId: null, keyId: 1, keyPrefix: "sk_test_x" };

describe("days in a time zone", () => {
  it("puts 22:30 UTC on the next day in Africa/Nairobi (UTC+3), and on the same day in UTC", () => {
    const at = new Date("2026-11-01T22:30:00Z");
    expect(localDay(at, "Africa/Nairobi")).toBe("2026-11-02");
    expect(localHour(at, "Africa/Nairobi")).toBe(1);
    expect(localDay(at, "UTC")).toBe("2026-11-01");
    expect(iso(startOfLocalDay("2026-11-02", "Africa/Nairobi"))).toBe("2026-11-01T21:00:00.000Z");
    expect(iso(startOfLocalDay("2026-11-02", "UTC"))).toBe("2026-11-02T00:00:00.000Z");
  });

  it("follows America/New_York across its DST changes: a 23-hour day in March, a 25-hour day in November", () => {
    const zone = "America/New_York";
    // 8 March 2026: clocks go from 02:00 EST to 03:00 EDT.
    const march = localDayRange(zone, "2026-03-08", "2026-03-08");
    expect(iso(march.gte)).toBe("2026-03-08T05:00:00.000Z");
    expect(iso(march.lt)).toBe("2026-03-09T04:00:00.000Z");
    expect(march.lt!.getTime() - march.gte!.getTime()).toBe(23 * 3_600_000);
    // 1 November 2026: clocks go from 02:00 EDT back to 01:00 EST.
    const november = localDayRange(zone, "2026-11-01", "2026-11-01");
    expect(iso(november.gte)).toBe("2026-11-01T04:00:00.000Z");
    expect(iso(november.lt)).toBe("2026-11-02T05:00:00.000Z");
    expect(november.lt!.getTime() - november.gte!.getTime()).toBe(25 * 3_600_000);
    // Each side of the boundaries.
    expect(localDay(new Date("2026-03-09T03:59:59.999Z"), zone)).toBe("2026-03-08");
    expect(localDay(new Date("2026-03-09T04:00:00.000Z"), zone)).toBe("2026-03-09");
    expect(localDay(new Date("2026-11-02T04:59:59.999Z"), zone)).toBe("2026-11-01");
    expect(localDay(new Date("2026-11-02T05:00:00.000Z"), zone)).toBe("2026-11-02");
  });

  it("starts a day whose midnight does not exist at its first instant (America/Santiago, 4 September 2022)", () => {
    const start = startOfLocalDay("2022-09-04", "America/Santiago");
    expect(iso(start)).toBe("2022-09-04T04:00:00.000Z");
    expect(localDay(start, "America/Santiago")).toBe("2022-09-04");
    expect(localDay(new Date(start.getTime() - 1), "America/Santiago")).toBe("2022-09-03");
  });

  it("handles half-hour and quarter-hour offsets, and dates across months and years", () => {
    expect(iso(startOfLocalDay("2026-01-01", "Asia/Kathmandu"))).toBe("2025-12-31T18:15:00.000Z");
    expect(iso(startOfLocalDay("2026-01-01", "Asia/Kolkata"))).toBe("2025-12-31T18:30:00.000Z");
    expect(addDays("2026-12-31", 1)).toBe("2027-01-01");
    expect(addDays("2028-03-01", -1)).toBe("2028-02-29");
    expect(addDays("2026-11-02", -29)).toBe("2026-10-04");
  });

  it("knows IANA names and refuses others", () => {
    for (const zone of ["UTC", "Africa/Nairobi", "America/New_York", "Asia/Kathmandu"]) expect(isTimeZone(zone)).toBe(true);
    for (const zone of ["", "Mars/Olympus", "Africa/Nairobi; DROP", "../etc"]) expect(isTimeZone(zone)).toBe(false);
  });
});

describe("the lists' date filters", () => {
  it("are the zone's days, from its midnight to the next, as a plain created_at range", () => {
    expect(statusDateWhere(principal, { dateFrom: "2026-11-02", dateTo: "2026-11-02", timeZone: "Africa/Nairobi" }).createdAt).toEqual({
      gte: new Date("2026-11-01T21:00:00Z"),
      lt: new Date("2026-11-02T21:00:00Z"),
    });
    expect(statusDateWhere(principal, { dateFrom: "2026-03-08", timeZone: "America/New_York" }).createdAt).toEqual({ gte: new Date("2026-03-08T05:00:00Z") });
  });

  it("are UTC days without a zone (the /api family's published meaning)", () => {
    expect(statusDateWhere(principal, { dateFrom: "2026-11-01", dateTo: "2026-11-01" }).createdAt).toEqual({
      gte: new Date("2026-11-01T00:00:00Z"),
      lt: new Date("2026-11-02T00:00:00Z"),
    });
  });

  it("keep the first and last days the database takes, whatever the zone", () => {
    // Kiritimati is 14 hours ahead of UTC now (10:29 behind in year 1): no instant before year 1 is ever sent.
    const first = statusDateWhere(principal, { dateFrom: "0001-01-01", dateTo: "9999-12-30", timeZone: "Pacific/Kiritimati" }).createdAt as { gte: Date; lt: Date };
    expect(first.gte.getTime()).toBeGreaterThanOrEqual(Date.parse("0001-01-01T00:00:00Z"));
    expect(first.lt.toISOString().startsWith("9999-12-3")).toBe(true);
    const ahead = statusDateWhere(principal, { dateFrom: "0001-01-01", timeZone: "Asia/Tokyo" }).createdAt as { gte: Date };
    expect(ahead.gte.toISOString()).toBe("0001-01-01T00:00:00.000Z");
  });
});

describe("localDayReader (an export's days, one zone, many instants)", () => {
  it("answers what localDay answers, across DST changes at midnight, half-hour zones and the edges of the years", () => {
    const zones = ["UTC", "Africa/Nairobi", "America/Santiago", "America/Havana", "America/New_York", "Asia/Kathmandu", "Australia/Lord_Howe", "Pacific/Apia"];
    for (const zone of zones) {
      const dayOf = localDayReader(zone);
      // Newest first in uneven steps (as an export reads them), through 2023-2025's transitions, then both ends.
      for (let t = Date.UTC(2026, 0, 1), step = 0; t > Date.UTC(2023, 0, 1); t -= 5_432_101 + (step++ % 7) * 600_000) {
        const at = new Date(t);
        expect(dayOf(at), `${zone} ${at.toISOString()}`).toBe(localDay(at, zone));
      }
      for (const at of [new Date("0001-01-01T00:00:00.000Z"), new Date("9999-12-31T23:59:59.999Z"), new Date("2024-04-06T23:30:00.000Z")]) {
        expect(dayOf(at), `${zone} ${at.toISOString()}`).toBe(localDay(at, zone));
      }
    }
  });
});
