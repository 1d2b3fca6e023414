import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../support/gateway.ts";

/**
 * The plain-SQL transaction (src/db/sql.ts), which the billing cycle's steps run on: all of it or none of it, on the
 * gateway's own database (PGlite or PostgreSQL, per project), and the connection it used is fit for the next caller.
 */
describe("plain-SQL transactions", () => {
  let gw: TestGateway;
  let merchantId: number;
  const sql = () => gw.gateway.db.sql;
  const plans = async () =>
    (await sql().query<{ name: string }>(`SELECT name FROM plans WHERE merchant_id = $1 ORDER BY id`, [merchantId])).map((p) => p.name);
  const insertPlan = (tx: ReturnType<typeof sql>, name: string) =>
    tx.query(`INSERT INTO plans (merchant_id, mode, reference, name, amount, currency, interval) VALUES ($1, 'test', $2, $3, 100, 'KES', 'month')`, [
      merchantId,
      `pln_sqltx_${name}_${process.pid}`,
      name,
    ]);

  beforeAll(async () => {
    gw = await startTestGateway();
    merchantId = (await gw.createMerchant()).id;
  });
  afterAll(() => gw?.close());

  it("commits every statement when the work resolves, and answers what it answered", async () => {
    const out = await sql().transaction(async (tx) => {
      await insertPlan(tx, "first");
      // A nested call joins the transaction already open.
      await tx.transaction((inner) => insertPlan(inner, "second"));
      // The transaction sees its own writes.
      return (await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM plans WHERE merchant_id = $1`, [merchantId]))[0]!.n;
    });
    expect(out).toBe(2);
    expect(await plans()).toEqual(["first", "second"]);
  });

  it("writes nothing when the work throws, a statement's error included, and the next transaction runs clean", async () => {
    await expect(
      sql().transaction(async (tx) => {
        await insertPlan(tx, "rolled back");
        throw new Error("the step failed");
      }),
    ).rejects.toThrow("the step failed");
    await expect(
      sql().transaction(async (tx) => {
        await insertPlan(tx, "also rolled back");
        await insertPlan(tx, "first"); // the same reference twice: a unique violation from the database
      }),
    ).rejects.toThrow(/unique|duplicate/i);
    expect(await plans()).toEqual(["first", "second"]);

    // Ten side by side, each on its own connection (or PGlite's one, in turn): every connection went back clean.
    await Promise.all(Array.from({ length: 10 }, (_, i) => sql().transaction((tx) => insertPlan(tx, `after ${i}`))));
    expect((await plans()).length).toBe(12);
  });
});
