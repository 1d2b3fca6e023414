import { parse } from "csv-parse/sync";

/**
 * A CSV as a client's library reads it (csv-parse, strict: CRLF records, quotes only around whole fields, every record
 * as wide as the first); the text must end with CRLF, as the gateway writes it.
 */
export function csvRows(text: string): string[][] {
  if (text && !text.endsWith("\r\n")) throw new Error("the last record has no CRLF");
  return parse(text, { record_delimiter: "\r\n" }) as string[][];
}

/** The records keyed by the header. */
export function csvRecords(text: string): Record<string, string>[] {
  const [header, ...rows] = csvRows(text);
  return rows.map((row) => Object.fromEntries(header!.map((name, i) => [name, row[i]!])));
}
