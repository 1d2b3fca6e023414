import type { RawQuery } from "../../paging.ts";

/**
 * A customer search's index conditions without the trigrams most rows share.
 *
 * `col ILIKE '%term%'` through a pg_trgm GIN index looks up every trigram of the term and intersects their
 * posting lists: a trigram nearly every row has ("cus" when every address starts "customer", "gma" in a list of
 * gmail users) makes PostgreSQL decode its whole list, 1.7 ms for one rare e-mail among 100,000 where the rare part
 * alone takes 0.09 ms (bench/README.md). So the index is asked for the longest part of the term whose trigrams are
 * all uncommon, and the whole term is tested on the rows that part finds (a part of the term is in every row the
 * term is in: the answer is the same, only the work differs). How common a trigram is comes from ANALYZE: the
 * migration 20261126090000 keeps statistics on show_trgm() of each searched column, whose most common elements and
 * their frequencies pg_stats_ext_exprs gives. Before the first ANALYZE there are none and the term is used whole.
 */

/** A trigram in at least this share of a column's rows is left out of the index condition. */
const COMMON_TRIGRAM_SHARE = 0.05;
/** How long the statistics read from the database are used before they are read again. */
const STATISTICS_TTL_MS = 60_000;

export const SEARCHED_COLUMNS = ["first_name", "last_name", "email", "phone"] as const;
export type SearchedColumn = (typeof SEARCHED_COLUMNS)[number];

const isWordChar = (c: string) => /[\p{L}\p{N}]/u.test(c);

/**
 * The trigrams pg_trgm looks up for `ILIKE '%literal%'`, each with the span of the literal it needs: its words (runs
 * of letters and digits, lower-cased), each padded as pg_trgm pads a word (two blanks before, one after) only where
 * the word ends inside the literal, not where it runs into the pattern's wildcards. A padding blank stands for the
 * character that ends the word, so a part of the literal yields exactly the trigrams whose spans lie within it.
 */
export function likeTrigramSpans(literal: string): { trigram: string; from: number; to: number }[] {
  const text = literal.toLowerCase();
  const spans: { trigram: string; from: number; to: number }[] = [];
  let start = 0;
  while (start < text.length) {
    if (!isWordChar(text[start]!)) {
      start++;
      continue;
    }
    let end = start;
    while (end < text.length && isWordChar(text[end]!)) end++;
    // The padded word, and for each of its characters the index in the literal it stands for.
    const chars: [string, number][] = [];
    if (start > 0) chars.push([" ", start - 1], [" ", start - 1]);
    for (let i = start; i < end; i++) chars.push([text[i]!, i]);
    if (end < text.length) chars.push([" ", end]);
    for (let i = 0; i + 3 <= chars.length; i++) {
      spans.push({ trigram: chars[i]![0] + chars[i + 1]![0] + chars[i + 2]![0], from: chars[i]![1], to: chars[i + 2]![1] + 1 });
    }
    start = end;
  }
  return spans;
}

export const likeTrigrams = (literal: string) => new Set(likeTrigramSpans(literal).map((s) => s.trigram));

/**
 * The part of `term` to look up in the index: the longest run of the term whose trigrams include none of `common`,
 * preferring the one with the most trigrams; the term itself when it has no common trigram, or when every part with
 * a trigram has one (the index then has nothing better to go on).
 */
export function indexedPart(term: string, common: ReadonlySet<string>): string {
  const spans = likeTrigramSpans(term);
  const commonSpans = spans.filter((s) => common.has(s.trigram));
  if (commonSpans.length === 0) return term;
  let best = term;
  let bestCount = 0;
  for (let from = 0; from < term.length; from++) {
    // The longest part from here that holds no common trigram's span whole.
    const to = Math.min(term.length, ...commonSpans.filter((s) => s.from >= from).map((s) => s.to - 1));
    const inside = new Set(spans.filter((s) => s.from >= from && s.to <= to).map((s) => s.trigram));
    if (inside.size > bestCount || (inside.size === bestCount && inside.size > 0 && to - from > best.length)) {
      best = term.slice(from, to);
      bestCount = inside.size;
    }
  }
  return bestCount === 0 ? term : best;
}

/** The common trigrams of each searched column, as the last ANALYZE counted them; read at most once a minute. */
export function createTrigramStatistics(db: RawQuery) {
  let common = new Map<SearchedColumn, Set<string>>();
  let readAt = -Infinity;
  let reading: Promise<void> | null = null;

  async function read(): Promise<void> {
    const rows = await db.$queryRawUnsafe<{ name: string; elems: string[] | null; freqs: number[] | null }[]>(
      `SELECT statistics_name AS name, most_common_elems::text::text[] AS elems, most_common_elem_freqs AS freqs
       FROM pg_stats_ext_exprs WHERE tablename = 'customers' AND statistics_name = ANY($1::text[])`,
      SEARCHED_COLUMNS.map((column) => `customers_${column}_trigrams`),
    );
    const next = new Map<SearchedColumn, Set<string>>();
    for (const row of rows) {
      const column = SEARCHED_COLUMNS.find((c) => row.name === `customers_${c}_trigrams`);
      if (!column || !row.elems || !row.freqs) continue;
      next.set(column, new Set(row.elems.filter((_, i) => Number(row.freqs![i]) >= COMMON_TRIGRAM_SHARE)));
    }
    common = next;
    readAt = Date.now();
  }

  return {
    /** The common trigrams per column; the first call waits for them, later ones refresh them in the background. */
    async common(): Promise<ReadonlyMap<SearchedColumn, ReadonlySet<string>>> {
      if (Date.now() - readAt > STATISTICS_TTL_MS) {
        // A failed read (a database without the statistics) leaves the search on whole terms until the next try.
        reading ??= read()
          .catch(() => {
            readAt = Date.now();
          })
          .finally(() => {
            reading = null;
          });
        if (readAt === -Infinity) await reading;
      }
      return common;
    },
  };
}
