/**
 * CSV for spreadsheets: RFC 4180 (comma-separated, CRLF line ends, a field with a comma, a double quote, CR or LF
 * quoted, its quotes doubled) and formula neutralisation (OWASP's CSV injection advice): a text cell starting
 * with =, +, -, @, tab or CR would be read as a formula by Excel, LibreOffice or Google Sheets, so it is
 * prefixed with a single quote. Numbers are written as numbers (a negative amount keeps its minus and still
 * sums): only text cells are neutralised, and a numeric cell is never text a payer or merchant wrote.
 */
export type CsvCell = string | number | bigint | null;

const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

/** One text cell: neutralised, then quoted when it must be. */
export function csvText(value: string): string {
  const safe = FORMULA_START.test(value) ? `'${value}` : value;
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
