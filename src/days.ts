/**
 * Calendar days in a time zone (an IANA name: Africa/Nairobi, America/New_York, UTC), with Intl only. A merchant's
 * figures, lists and reports count a payment on the day it was created in the merchant's zone; the /api family
 * keeps its published UTC days. Instants are computed here once, so queries filter `created_at >= start AND
 * created_at < end` (index-friendly) instead of converting the column.
 */

export const UTC = "UTC";
const DAY_MS = 86_400_000;

/** An IANA zone name the runtime knows (Africa/Nairobi, UTC). */
export function isTimeZone(name: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]{0,63}$/.test(name)) return false;
  try {
    new Intl.DateTimeFormat("en", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();
/** One formatter per zone (building one costs far more than using it). */
function wallClock(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat("en-CA", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", era: "short",
    });
    formatters.set(zone, formatter);
  }
  return formatter;
}

function parts(at: Date, zone: string) {
  const p = Object.fromEntries(wallClock(zone).formatToParts(at).map((x) => [x.type, x.value]));
  // Years before 1 are "BC" (era); the filters never go there, but the arithmetic stays right.
  const year = p.era === "BC" || p.era === "B" ? 1 - Number(p.year) : Number(p.year);
  return { year, month: Number(p.month), day: Number(p.day), hour: Number(p.hour), minute: Number(p.minute), second: Number(p.second) };
}

/** YYYY-MM-DD of a UTC date's own calendar fields (years 0001 to 9999). */
const isoDay = (utc: Date) => utc.toISOString().slice(0, 10);

/** The local date (YYYY-MM-DD) of `at` in `zone`. */
export function localDay(at: Date, zone: string): string {
  const p = parts(at, zone);
  return `${String(p.year).padStart(4, "0")}-${String(p.month).padStart(2, "0")}-${String(p.day).padStart(2, "0")}`;
}

/** The local hour (0 to 23) of `at` in `zone`. */
export function localHour(at: Date, zone: string): number {
  return parts(at, zone).hour;
}

/** How far `zone`'s wall clock is ahead of UTC at `at`, in milliseconds (seconds included: old zones had them). */
function offsetAt(at: Date, zone: string): number {
  const p = parts(at, zone);
  const wall = new Date(0);
  wall.setUTCFullYear(p.year, p.month - 1, p.day);
  wall.setUTCHours(p.hour, p.minute, p.second, 0);
  return wall.getTime() - Math.floor(at.getTime() / 1000) * 1000;
}

/**
 * The instant `day` (YYYY-MM-DD) begins in `zone`: its local midnight, or the first instant after it when a DST
 * change skips midnight (as America/Santiago's does). Two passes of the zone's offset settle it; DST changes
 * happen at night, never twice in a day.
 */
export function startOfLocalDay(day: string, zone: string): Date {
  const utcMidnight = new Date(`${day}T00:00:00.000Z`).getTime();
  let guess = utcMidnight - offsetAt(new Date(utcMidnight), zone);
  guess = utcMidnight - offsetAt(new Date(guess), zone);
  // A midnight that does not exist (clocks jumped from 23:59:59 to 01:00): the guess lands on the day before.
  if (localDay(new Date(guess), zone) < day) {
    const later = utcMidnight - offsetAt(new Date(guess + 3 * 3_600_000), zone);
    if (localDay(new Date(later), zone) === day) return new Date(later);
  }
  return new Date(guess);
}

/** The date `n` days after (or before, negative) `day`, both YYYY-MM-DD. */
export function addDays(day: string, n: number): string {
  return isoDay(new Date(new Date(`${day}T00:00:00.000Z`).getTime() + n * DAY_MS));
}

/** The instants [start, end) of the local days `from` to `to` (both included, either open) in `zone`. */
export function localDayRange(zone: string, from?: string, to?: string): { gte?: Date; lt?: Date } {
  return {
    ...(from ? { gte: startOfLocalDay(from, zone) } : {}),
    ...(to ? { lt: startOfLocalDay(addDays(to, 1), zone) } : {}),
  };
}

/**
 * localDay for many instants in one zone, as an export reads them (newest first, most rows in few days): a day's
 * [start, end) is worked out once and answers every instant in it while the zone's offset is the same at both ends
 * (no DST change inside, so the wall clock runs straight through the day); a day with a change, or at the edges of
 * the representable years, is answered instant by instant by localDay.
 */
export function localDayReader(zone: string): (at: Date) => string {
  let start = 0;
  let end = 0;
  let day = "";
  return (at) => {
    const ms = at.getTime();
    if (ms >= start && ms < end) return day;
    const found = localDay(at, zone);
    try {
      const from = startOfLocalDay(found, zone).getTime();
      const to = startOfLocalDay(addDays(found, 1), zone).getTime();
      if (from <= ms && ms < to && offsetAt(new Date(from), zone) === offsetAt(new Date(to - 1), zone)) [start, end, day] = [from, to, found];
    } catch {
      // A day whose bounds no Date holds (around years 1 and 9999): not cached.
    }
    return found;
  };
}
