import { describe, expect, it } from "vitest";
import { csvLine, csvText } from "../../src/modules/ledger/csv.ts";

/** The cells a spreadsheet would make of one CSV field's value when it splits on `separator` (quotes ignored, as a mis-set locale does). */
function cellsSplitOn(value: string, separator: string): string[] {
  return value.split(separator).map((cell) => cell.replace(/^[\s"]+/, ""));
}

/** The cell writer as it was before its fast path (one walk over every character): the fast path must write the same. */
function csvTextByWalk(value: string): string {
  if (/^(?:\+\d{6,15}|0\d{6,14})$/.test(value)) return `"=""${value}"""`;
  let safe = "";
  let cellStart = true;
  for (const char of value) {
    if (cellStart && ["=", "+", "-", "@", "\t", "\r"].includes(char)) safe += "'";
    safe += char;
    if ([",", ";", "|", "\t", "\r", "\n"].includes(char)) cellStart = true;
    else if (char !== " " && char !== '"') cellStart = false;
  }
  return /[",;|\t\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

describe("the CSV exports' cells", () => {
  it("writes every cell as the character walk does (the fast path for cells without separators or quotes changes nothing)", () => {
    const alphabet = ["a", "Z", "0", "7", " ", "=", "+", "-", "@", "\t", "\r", "\n", ",", ";", "|", '"', "'", "é", "😀", "."];
    let seed = 42;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const samples = ["", " ", "  =1", " -2", "2026-11-29T12:00:00.000Z", "payer@example.test", "@home", "x_42", "+254708374149", "0712345678", "+25", "- 5"];
    for (let i = 0; i < 20_000; i++) {
      const length = Math.floor(random() * 8);
      samples.push(Array.from({ length }, () => alphabet[Math.floor(random() * alphabet.length)]).join(""));
    }
    for (const value of samples) expect(csvText(value), JSON.stringify(value)).toBe(csvTextByWalk(value));
  });

  it("neutralises a text cell that a spreadsheet would run as a formula", () => {
    for (const start of ["=", "+", "-", "@"]) expect(csvText(`${start}SUM(A1:A9)`)).toBe(`'${start}SUM(A1:A9)`);
    // A tab is a separator too, so the cell is also quoted.
    expect(csvText("\tSUM(A1:A9)")).toBe(`"'\tSUM(A1:A9)"`);
    // CR both neutralised and quoted (RFC 4180: a field holding CR is quoted).
    expect(csvText("\rcmd")).toBe(`"'\rcmd"`);
    expect(csvText("plain text")).toBe("plain text");
    expect(csvText("a=b")).toBe("a=b");
    expect(csvText("a - b + c")).toBe("a - b + c");
  });

  it("neutralises a formula character after any separator a spreadsheet may split on, and quotes the cell", () => {
    expect(csvText("x;=1+1")).toBe(`"x;'=1+1"`);
    expect(csvText("x,=1+1")).toBe(`"x,'=1+1"`);
    expect(csvText("x|@SUM(A1)")).toBe(`"x|'@SUM(A1)"`);
    expect(csvText("x\t-2")).toBe(`"x\t'-2"`);
    expect(csvText("x\n+cmd")).toBe(`"x\n'+cmd"`);
    // Spaces and quotes between the separator and the formula do not hide it.
    expect(csvText('x; "=HYPERLINK(1)')).toBe(`"x; ""'=HYPERLINK(1)"`);
    expect(csvText("x;;=1")).toBe(`"x;;'=1"`);
    // A separator alone is quoted, nothing else changes.
    expect(csvText("a;b|c")).toBe(`"a;b|c"`);
  });

  it("leaves no cell starting with a formula character whichever separator the spreadsheet splits on", () => {
    const hostile = ["x;=1+1", "a,b;-c|+d\t@e", '"; =cmd|\' /c calc\'!A0', "ok\r\n=2", "=1;=2,=3|=4"];
    for (const value of hostile) {
      const written = csvText(value);
      for (const separator of [",", ";", "|", "\t", "\n"]) {
        for (const cell of cellsSplitOn(written, separator)) expect(cell, `${JSON.stringify(value)} split on ${JSON.stringify(separator)}`).not.toMatch(/^[=+\-@]/);
      }
    }
  });

  it("quotes a field holding a comma, a quote, CR or LF, doubling its quotes", () => {
    expect(csvText('say "hi", then go')).toBe('"say ""hi"", then go"');
    expect(csvText("two\nlines")).toBe('"two\nlines"');
    expect(csvText('=1+"2"')).toBe(`"'=1+""2"""`);
  });

  it("writes numbers as numbers (a negative amount keeps its minus), null as empty, CRLF at the end", () => {
    expect(csvLine([12n, "refund", -4000n, 0, null, "-neg text"])).toBe("12,refund,-4000,0,,'-neg text\r\n");
  });

  it("writes a phone-like value (digits after + or a leading 0) as a text formula a spreadsheet shows as the number it is", () => {
    expect(csvText("+254708374149")).toBe('"=""+254708374149"""');
    expect(csvText("0712345678")).toBe('"=""0712345678"""');
    // Anything but digits after the + is neutralised as before.
    expect(csvText("+254708374149;=1")).toBe(`"'+254708374149;'=1"`);
    expect(csvText('+2547"&cmd')).toBe(`"'+2547""&cmd"`);
    expect(csvText("+1")).toBe("'+1");
  });
});
