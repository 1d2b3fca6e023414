import { describe, expect, it } from "vitest";
import { csvLine, csvText } from "../../src/modules/ledger/csv.ts";

describe("the balance-transactions CSV's cells", () => {
  it("neutralises a text cell that a spreadsheet would run as a formula", () => {
    for (const start of ["=", "+", "-", "@", "\t"]) expect(csvText(`${start}SUM(A1:A9)`)).toBe(`'${start}SUM(A1:A9)`);
    // CR both neutralised and quoted (RFC 4180: a field holding CR is quoted).
    expect(csvText("\rcmd")).toBe(`"'\rcmd"`);
    expect(csvText("plain text")).toBe("plain text");
    expect(csvText("a=b")).toBe("a=b");
  });

  it("quotes a field holding a comma, a quote, CR or LF, doubling its quotes", () => {
    expect(csvText('say "hi", then go')).toBe('"say ""hi"", then go"');
    expect(csvText("two\nlines")).toBe('"two\nlines"');
    expect(csvText('=1+"2"')).toBe(`"'=1+""2"""`);
  });

  it("writes numbers as numbers (a negative amount keeps its minus), null as empty, CRLF at the end", () => {
    expect(csvLine([12n, "refund", -4000n, 0, null, "-neg text"])).toBe("12,refund,-4000,0,,'-neg text\r\n");
  });
});
