import { setImmediate } from "node:timers/promises";

/**
 * CSV for spreadsheets, the one cell writer every export uses: RFC 4180 (comma-separated, CRLF line ends, a
 * field with a separator, a double quote, CR or LF quoted, its quotes doubled) and formula neutralisation
 * (OWASP's CSV injection advice). A text cell starting with =, +, -, @, tab or CR would be read as a formula
 * by Excel, LibreOffice or Google Sheets, so it is prefixed with a single quote. A spreadsheet set to another
 * separator (semicolon locales, or a tab or pipe chosen on import) splits `x;=1+1` into `x` and `=1+1`, quotes
 * or not, so the same quote also goes before a formula character that follows any of , ; | tab CR LF (spaces
 * and double quotes in between do not count). Numbers are written as numbers (a negative amount keeps its
 * minus and still sums): only text cells are neutralised, and a numeric cell is never text a payer or
 * merchant wrote.
 *
 * A phone-like value (digits only, after a + or a leading 0: +254708374149, 0712345678) is written as the text
 * formula ="+254708374149", the spreadsheets' own way to keep it text: a plain + or 0 cell would become a number
 * (254708374149, 712345678) and a neutralised one would show its quote. The pattern admits nothing but digits, so
 * no value a payer controls can ride in it.
 */
export type CsvCell = string | number | bigint | null;

/** The rules above as the reports' OpenAPI descriptions state them. */
export const CSV_RULES =
  "RFC 4180 (CRLF; a field holding a comma, semicolon, pipe, tab, quote, CR or LF quoted, quotes doubled). A text cell starting with =, +, -, @, " +
  "tab or CR, and any such character that follows a comma, semicolon, pipe, tab, CR or LF inside a text cell (spaces and quotes between), " +
  "gets a ' before it so spreadsheets in any locale do not run it as a formula; numbers are left as numbers. A phone-like text cell " +
  '(digits only after a + or a leading 0, e.g. +254708374149) is written ="+254708374149" so a spreadsheet shows it as that text.';

const FORMULA_CHARACTERS = new Set(["=", "+", "-", "@", "\t", "\r"]);
/** Where a spreadsheet may start a new cell: the separators of the common locales and imports, and line ends. */
const SEPARATORS = new Set([",", ";", "|", "\t", "\r", "\n"]);
const NEEDS_QUOTES = /[",;|\t\r\n]/;
const NOT_SPACE = /[^ ]/;

/** + or 0, then digits only: a phone number a spreadsheet would otherwise turn into a number. */
const PHONE_LIKE = /^(?:\+\d{6,15}|0\d{6,14})$/;

/** One text cell: neutralised, then quoted when it must be. */
export function csvText(value: string): string {
  // ="..." with its quotes doubled for RFC 4180: the spreadsheet reads the text "+254...", not a number.
  if (PHONE_LIKE.test(value)) return `"=""${value}"""`;
  if (!NEEDS_QUOTES.test(value)) {
    // No separator or quote inside (most cells: references, e-mails, instants): only the cell's own start, after
    // any spaces, can begin a formula, so the loop below would add at most that one quote. An export writes
    // millions of cells; this skips the per-character walk.
    const at = value.search(NOT_SPACE);
    return at >= 0 && FORMULA_CHARACTERS.has(value[at]!) ? `${value.slice(0, at)}'${value.slice(at)}` : value;
  }
  let safe = "";
  let cellStart = true;
  for (const char of value) {
    if (cellStart && FORMULA_CHARACTERS.has(char)) safe += "'";
    safe += char;
    if (SEPARATORS.has(char)) cellStart = true;
    else if (char !== " " && char !== '"') cellStart = false;
  }
  return NEEDS_QUOTES.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

function csvCell(value: CsvCell): string {
  if (value === null) return "";
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  return csvText(value);
}

/** One record, CRLF-terminated. */
export function csvLine(cells: readonly CsvCell[]): string {
  return `${cells.map(csvCell).join(",")}\r\n`;
}

/** Rows written per slice of an export before the event loop gets a turn (other requests wait at most one slice). */
const ROWS_PER_SLICE = 250;

/**
 * An export's CSV text: the header, then each batch's rows in slices of ROWS_PER_SLICE, giving the event loop a
 * turn (setImmediate) between slices so requests arriving meanwhile are not queued behind a whole batch. Pulled by
 * the response stream: the next batch is read only when the socket has taken the last one (backpressure), and a
 * client that goes away ends the batches' generator (its `finally` runs), so no further statement is sent.
 */
export async function* csvChunks<T>(header: readonly string[], batches: AsyncIterable<readonly T[]>, cells: (row: T) => readonly CsvCell[]): AsyncGenerator<string> {
  yield csvLine(header);
  for await (const batch of batches) {
    for (let from = 0; from < batch.length; from += ROWS_PER_SLICE) {
      if (from > 0) await setImmediate();
      let text = "";
      const to = Math.min(batch.length, from + ROWS_PER_SLICE);
      for (let i = from; i < to; i++) text += csvLine(cells(batch[i]!));
      yield text;
    }
  }
}
