import { request as httpRequest, type ClientRequest, type IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXPORT_RETRY_AFTER_SECONDS } from "../../src/rest/export-slots.ts";
import { apiClient, createSandboxMerchant, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";
import { waitUntil } from "../support/wait.ts";

/**
 * Issue 35 items 8 and 10 over real HTTP: what a payer or merchant wrote reaches the CSV reports neutralised
 * whatever separator a spreadsheet splits on; and full exports are limited per merchant and per instance
 * (EXPORTS_PER_MERCHANT=2, EXPORTS_PER_INSTANCE=3 here), a 429 with Retry-After beyond, each slot freed when its
 * response ends or its client disconnects.
 */
let gw: TestGateway;
let big: TestMerchant & { channelId: number };
let other: TestMerchant & { channelId: number };
let third: TestMerchant & { channelId: number };
/** Rows of each big merchant: tens of megabytes of CSV, far more than the sockets buffer, so an unread export stays open. */
const ROWS = 25_000;

async function seed(merchant: { id: number; channelId: number }, prefix: string) {
  await gw.gateway.db.sql.query(
    `INSERT INTO transactions (merchant_id, mode, reference, access_code, amount, currency, status, email, description, channel_id, created_at, updated_at)
     SELECT $1::int, 'test', $3 || i, 'ac_' || $3 || i, 100 + i, 'KES', 'completed', 'bulk' || i || '@example.com', repeat('bulk export row ', 20),
       $2::int, now() - i * interval '1 second', now()
     FROM generate_series(1, ${ROWS}) i`,
    [merchant.id, merchant.channelId, prefix],
  );
}

beforeAll(async () => {
  gw = await startTestGateway({ env: { RATE_LIMIT_ENABLED: "false", EXPORTS_PER_MERCHANT: "2", EXPORTS_PER_INSTANCE: "3" } });
  [big, other, third] = [await createSandboxMerchant(gw), await createSandboxMerchant(gw), await createSandboxMerchant(gw)];
  await seed(big, "bulk_a_");
  await seed(other, "bulk_b_");
});
afterAll(async () => {
  for (const request of opened) request.destroy();
  await gw?.close();
});

describe("CSV cells that a spreadsheet would run as formulas", () => {
  it("a description, e-mail and client reference with formulas after a separator are neutralised in the transactions export", async () => {
    const api = apiClient(gw.url, third.testKey);
    const init = await api.post("/api/transactions/initialize", { amount: 1000, email: "payer@example.com", description: "x;=1+1", reference: "=HYPERLINK(1)|@SUM(A1)" });
    expect(init.status, init.text).toBe(200);
    const csv = await api.get("/v1/reports/transactions.csv");
    expect(csv.status, csv.text).toBe(200);
    const row = csv.text.split("\r\n").find((line) => line.includes(init.body.reference))!;
    expect(row).toContain(`,"x;'=1+1",`);
    expect(row).toContain(`,"'=HYPERLINK(1)|'@SUM(A1)",`);
    // Whichever separator a spreadsheet splits the line on, no piece starts with a formula character.
    for (const separator of [",", ";", "|", "\t"]) {
      for (const cell of row.split(separator)) expect(cell.replace(/^[\s"]+/, ""), `split on ${separator}`).not.toMatch(/^[=+@]/);
    }
  });
});

/** Every export opened, so none is left holding the server open when a test fails. */
const opened: ClientRequest[] = [];

/** A GET of an export that reads nothing until told: the server's writes stall, so the export holds its slot. */
function openExport(merchant: TestMerchant, path = "/v1/reports/transactions.csv"): Promise<{ response: IncomingMessage; request: ClientRequest }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${gw.url}${path}`, { headers: { "x-api-key": merchant.testKey } }, (response) => {
      response.pause();
      resolve({ response, request });
    });
    request.on("error", reject);
    opened.push(request);
    request.end();
  });
}

/** Reads a response to its end; answers its text. */
function readAll(response: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    response.on("data", (chunk: Buffer) => chunks.push(chunk));
    response.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    response.on("error", reject);
    response.resume();
  });
}

/** An export asked for as a client would: a 429 is retried (sooner than its Retry-After, to keep the suite short) until a 200. */
async function exportOnceFree(merchant: TestMerchant) {
  let result: { status: number; text: string } | undefined;
  await waitUntil(async () => {
    const opened = await openExport(merchant);
    if (opened.response.statusCode === 200) {
      result = { status: 200, text: await readAll(opened.response) };
      return true;
    }
    await readAll(opened.response);
    return false;
  }, "a free export slot", 60_000);
  return result!;
}

describe("concurrent full CSV exports", () => {
  it("a merchant's third export at once is a 429 with Retry-After; another merchant's still streams until the instance's limit", async () => {
    const first = await openExport(big);
    const second = await openExport(big);
    expect([first.response.statusCode, second.response.statusCode]).toEqual([200, 200]);

    const third_ = await apiClient(gw.url, big.testKey).get("/v1/reports/transactions.csv");
    expect(third_.status).toBe(429);
    expect(third_.headers.get("retry-after")).toBe(String(EXPORT_RETRY_AFTER_SECONDS));
    expect(third_.body).toEqual({ status: "error", code: "rate_limited", message: "At most 2 CSV exports of a merchant run at once; retry when one has finished" });

    const others = await openExport(other);
    expect(others.response.statusCode).toBe(200);
    // Three running: the instance's limit, whoever asks.
    const refused = await apiClient(gw.url, third.testKey).get("/v1/reports/transactions.csv");
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe(String(EXPORT_RETRY_AFTER_SECONDS));
    expect(refused.body).toMatchObject({ status: "error", code: "rate_limited", message: "Too many CSV exports are running on this server; retry shortly" });

    // A client that disconnects mid-export frees its slot: the merchant's next export is served.
    first.request.destroy();
    const again = await exportOnceFree(big);
    expect(again.text.split("\r\n").filter(Boolean)).toHaveLength(ROWS + 1);

    // An export read to its end frees its slot too: the other merchant's full file, then the third merchant is served.
    const full = await readAll(others.response);
    expect(full.split("\r\n").filter(Boolean)).toHaveLength(ROWS + 1);
    const served = await exportOnceFree(third);
    expect(served.status).toBe(200);

    second.request.destroy();
    // Every slot is free again: two at once for the big merchant.
    const [a, b] = [await openExport(big), await openExport(big)];
    expect([a.response.statusCode, b.response.statusCode]).toEqual([200, 200]);
    a.request.destroy();
    b.request.destroy();
  });

  it("a refused filter spends no slot", async () => {
    for (let i = 0; i < 4; i++) {
      const res = await apiClient(gw.url, third.testKey).get("/v1/reports/transactions.csv?date_to=2024-02-30");
      expect(res.status).toBe(400);
    }
    const ok = await exportOnceFree(third);
    expect(ok.status).toBe(200);
  });
});
