import type { PGlite } from "@electric-sql/pglite";
import type pg from "pg";

/**
 * Plain SQL on the database Prisma uses (the same pg pool, or the same PGlite), for the few statements
 * on the hottest paths (verify, list, initialize). Prisma's query layer costs about 0.2 ms of CPU per
 * statement on top of the driver's 0.09 ms (bench/README.md), which is most of such a request. Everything
 * else stays on Prisma; statements here must return exactly what the Prisma model would (see the row
 * mappers next to them, and the test that compares the two).
 */
export interface Sql {
  query<T extends object>(text: string, params?: readonly unknown[]): Promise<T[]>;
}

/** pg prepares each distinct statement once per connection when it is named: the server skips parse and plan. */
export function poolSql(pool: pg.Pool, onQuery?: (sql: string) => void): Sql {
  const names = new Map<string, string>();
  return {
    async query<T extends object>(text: string, params: readonly unknown[] = []) {
      onQuery?.(text);
      let name = names.get(text);
      if (!name) names.set(text, (name = `hot_${names.size + 1}`));
      const result = await pool.query<T>({ name, text, values: params as unknown[] });
      return result.rows;
    },
  };
}

/** PGlite runs one statement at a time and waits for any open transaction, as Prisma's adapter does. */
export function pgliteSql(db: PGlite, onQuery?: (sql: string) => void): Sql {
  return {
    async query<T extends object>(text: string, params: readonly unknown[] = []) {
      onQuery?.(text);
      return (await db.query<T>(text, params as unknown[])).rows;
    },
  };
}
