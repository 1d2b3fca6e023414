import type { Sql } from "./sql.ts";

/** How a column travels: as it is, int8 as text (drivers parse it differently) to a BigInt, or a timestamp to a Date. */
export type ColumnKind = "value" | "bigint" | "time";

/**
 * A table's rows for the plain-SQL statements (the status machine's RETURNING, reads by id), from one
 * map of every model field to its kind: the SELECT list (each field's column is its name in snake_case,
 * as prisma/schema.prisma maps them), the row -> model mapping and the read by id. The map's type holds
 * it to the model: a field added to the schema and not here fails typecheck.
 */
export function tableRows<Model>(table: string, fields: { [K in keyof Model]-?: ColumnKind }) {
  const entries = Object.entries(fields) as [string, ColumnKind][];
  const snake = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  const columns = entries
    .map(([field, kind]) => {
      const column = kind === "bigint" ? `${snake(field)}::text` : snake(field);
      return column === field ? field : `${column} AS "${field}"`;
    })
    .join(", ");
  const fromRow = (row: Record<string, unknown>): Model => {
    const out: Record<string, unknown> = { ...row };
    for (const [field, kind] of entries) {
      const value = row[field];
      if (value === null || value === undefined) continue;
      if (kind === "bigint") out[field] = BigInt(value as string);
      else if (kind === "time") out[field] = value instanceof Date ? value : new Date(value as string);
    }
    return out as Model;
  };
  const byId = `SELECT ${columns} FROM ${table} WHERE id = $1`;
  return {
    /** The SELECT list of a whole row, model field names as aliases, over bare column names. */
    columns,
    fromRow,
    async findById(sql: Sql, id: number): Promise<Model | null> {
      const [row] = await sql.query<Record<string, unknown>>(byId, [id]);
      return row ? fromRow(row) : null;
    },
  };
}
