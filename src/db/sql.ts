import { protocol, type PGlite } from "@electric-sql/pglite";
import type pg from "pg";

/**
 * Plain SQL on the database Prisma uses (the same pg pool, or the same PGlite), for the few statements
 * on the hottest paths (verify, list, initialize, a transaction's status change, STK callbacks, card
 * payments) and the billing cycle's steps (their transactions too). Prisma's query layer costs about 0.2 ms of CPU
 * per statement on top of the driver's 0.09 ms (bench/README.md), which is most of such a request. Everything
 * else stays on Prisma; statements here must return exactly what the Prisma model would (see the row
 * mappers next to them, and the test that compares the two).
 */
export interface Sql {
  query<T extends object>(text: string, params?: readonly unknown[], options?: QueryOptions): Promise<T[]>;
}

export interface QueryOptions {
  /**
   * Plan the statement for these parameters every time instead of preparing it once. For a join whose best plan
   * depends on a table's size (a batch's rows matched by id): a plan cached while the table was small scans all of
   * it once it is large, until the next ANALYZE. Planning costs a fraction of a millisecond; only for statements
   * that run once per batch.
   */
  planEachTime?: boolean;
}

/** The primary's plain SQL, which also runs transactions. */
export interface TransactionalSql extends Sql {
  /**
   * Runs `run` in one database transaction on one connection, its statements prepared like any other here: committed
   * when it resolves, rolled back when it throws. Inside one, `transaction` runs in the transaction already open.
   */
  transaction<T>(run: (tx: TransactionalSql) => Promise<T>): Promise<T>;
}

/**
 * pg prepares each distinct statement once per connection when it is named: the server skips parse and plan.
 * `prefix` keeps two Sqls' names apart where their statements can meet on one connection (the reader's retry
 * on the primary): pg refuses a name prepared there for other text.
 */
export function poolSql(pool: pg.Pool, onQuery?: (sql: string) => void, prefix = "hot"): TransactionalSql {
  const names = new Map<string, string>();
  const on = (target: pg.Pool | pg.PoolClient) =>
    async function query<T extends object>(text: string, params: readonly unknown[] = [], options?: QueryOptions) {
      onQuery?.(text);
      if (options?.planEachTime) return (await target.query<T>({ text, values: params as unknown[] })).rows;
      let name = names.get(text);
      if (!name) names.set(text, (name = `${prefix}_${names.size + 1}`));
      const result = await target.query<T>({ name, text, values: params as unknown[] });
      return result.rows;
    };
  return {
    query: on(pool),
    async transaction<T>(run: (tx: TransactionalSql) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      const tx: TransactionalSql = { query: on(client), transaction: (inner) => inner(tx) };
      try {
        await client.query("BEGIN");
        const out = await run(tx);
        await client.query("COMMIT");
        client.release();
        return out;
      } catch (error) {
        // A connection that cannot even roll back is closed rather than returned to the pool mid-transaction.
        const rolledBack = await client.query("ROLLBACK").then(() => true, () => false);
        client.release(rolledBack ? undefined : true);
        throw error;
      }
    },
  };
}

/**
 * PGlite's query() sends Parse, Describe, Bind, Describe, Execute and Sync as six calls into the WebAssembly
 * Postgres, parsing and planning the statement every time: about 215 µs for verify's SELECT, against 45 µs
 * for Bind + Execute + Sync of a statement prepared once (measured in-process, 2,000 rows). So each distinct
 * text is prepared once (Parse and Describe, which also give the parameter and column types) and then runs
 * in one call. Statements wait, as query() does, for an open transaction (Prisma's adapter holds PGlite's
 * transaction lock across an interactive transaction) and for the statement in flight.
 */
export function pgliteSql(db: PGlite, onQuery?: (sql: string) => void): TransactionalSql {
  const { serialize } = protocol;
  const prepared = new Map<string, Promise<PreparedStatement>>();

  /** Parses `text` as `name` (the unnamed statement "" is planned afresh at each Bind). */
  async function prepare(text: string, name: string): Promise<PreparedStatement> {
    const { messages } = await db.execProtocol(concat(serialize.parse({ name, text }), serialize.describe({ type: "S", name }), serialize.sync()), {});
    const parameters = messages.find((m): m is InstanceType<typeof protocol.messages.ParameterDescriptionMessage> => m.name === "parameterDescription");
    const rows = messages.find((m): m is InstanceType<typeof protocol.messages.RowDescriptionMessage> => m.name === "rowDescription");
    return {
      name,
      parameterTypes: parameters?.dataTypeIDs ?? [],
      columns: (rows?.fields ?? []).map((field) => ({ name: field.name, type: field.dataTypeID, parse: db.parsers[field.dataTypeID] })),
    };
  }

  /** One statement, for a caller that holds PGlite's transaction lock (its own, or an open transaction's). */
  function run<T extends object>(text: string, params: readonly unknown[] = [], options?: QueryOptions): Promise<T[]> {
    onQuery?.(text);
    return db._runExclusiveQuery(async () => {
      let statement = options?.planEachTime ? prepare(text, "") : prepared.get(text);
      if (!statement) {
        statement = prepare(text, `hot_${prepared.size}`);
        prepared.set(text, statement);
        statement.catch(() => prepared.delete(text)); // a statement that does not parse is not kept
      }
      const { name, parameterTypes, columns } = await statement;
      const values = params.map((value, i) => {
        if (value === null || value === undefined) return null;
        const serializer = db.serializers[parameterTypes[i]!];
        return serializer ? serializer(value) : String(value);
          });
          const { messages } = await db.execProtocol(concat(serialize.bind({ statement: name, values }), serialize.execute({}), serialize.sync()), {});
          const result: T[] = [];
          for (const message of messages) {
            if (message.name !== "dataRow") continue;
            const fields = (message as InstanceType<typeof protocol.messages.DataRowMessage>).fields;
            const row: Record<string, unknown> = {};
            columns.forEach((column, i) => {
              const raw = fields[i] ?? null;
              row[column.name] = raw === null || !column.parse ? raw : column.parse(raw, column.type);
            });
            result.push(row as T);
          }
          return result;
    });
  }

  return {
    query: (text, params, options) => db._runExclusiveTransaction(() => run(text, params, options)),
    transaction<T>(work: (tx: TransactionalSql) => Promise<T>): Promise<T> {
      const tx: TransactionalSql = { query: run, transaction: (inner) => inner(tx) };
      return db._runExclusiveTransaction(async () => {
        await run("BEGIN");
        try {
          const out = await work(tx);
          await run("COMMIT");
          return out;
        } catch (error) {
          await run("ROLLBACK");
          throw error;
        }
      });
    },
  };
}

interface PreparedStatement {
  name: string;
  parameterTypes: number[];
  columns: { name: string; type: number; parse: ((value: string, type: number) => unknown) | undefined }[];
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
