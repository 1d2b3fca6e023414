/**
 * An object as of an event (what subscribers and webhooks receive), defined once as a list of fields
 * from which both forms are built: `of(row)` in TypeScript, for rows the gateway holds, and `sql(alias)`,
 * a jsonb_build_object over a row of the table, for the status machine's one-statement change. The two
 * cannot drift apart: a field is one line here (test/unit/snapshot.test.ts holds each kind's two forms equal).
 */

/** How a column becomes a JSON value. */
export type SnapshotKind =
  /** As stored: text, integers, booleans, jsonb. */
  | "value"
  /** int8 money in minor units, as a JSON number (amounts stay below 2^53). */
  | "amount"
  /** A timestamp as ISO 8601 in UTC with milliseconds (Date.toISOString()). */
  | "time"
  /** An E.164 phone (+254...) as the wire's MSISDN (254...): phone.ts's toMsisdn(). */
  | "msisdn";

/**
 * The snapshot's keys in order, each with its model field, alone for a value kept as it is, or with its kind.
 * The field's column is its name in snake_case (prisma/schema.prisma maps every field so).
 */
export type SnapshotSpec<Row> = Record<string, (keyof Row & string) | readonly [keyof Row & string, SnapshotKind]>;

type Nullable<V, T> = null extends V ? T | null : T;
/** The JSON value a field of a given kind becomes. */
type ValueOf<Kind, V> = Kind extends "amount" ? number : Kind extends "time" | "msisdn" ? Nullable<V, string> : V;

/** The snapshot's type, from its spec. */
export type SnapshotOf<Row, Spec extends SnapshotSpec<Row>> = {
  -readonly [K in keyof Spec]: Spec[K] extends readonly [infer F extends keyof Row, infer Kind] ? ValueOf<Kind, Row[F]> : Spec[K] extends keyof Row ? Row[Spec[K]] : never;
};

export interface Snapshot<Row, Out = Record<string, unknown>> {
  /** The snapshot of a row as the model has it. */
  of(row: Row): Out;
  /**
   * The same snapshot as SQL over a row of the table named `alias`; `lead` names the CTE of a write made first in
   * the same statement (events/status-machine.ts LeadWrite), for a snapshot that reads what it wrote.
   */
  sql(alias: string, lead?: string): string;
}

function jsValue(kind: SnapshotKind, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (kind) {
    case "amount":
      return Number(value as bigint);
    case "time":
      return (value as Date).toISOString();
    case "msisdn":
      return (value as string).replace(/^\+/, "");
    default:
      return value;
  }
}

function sqlValue(kind: SnapshotKind, column: string): string {
  switch (kind) {
    case "time":
      return `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
    case "msisdn":
      return `ltrim(${column}, '+')`;
    default:
      return column;
  }
}

const snakeCase = (field: string) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** A snapshot from its spec; `defineSnapshot<Row>()({ column: field | [field, kind], ... })`. */
export function defineSnapshot<Row>() {
  return <const Spec extends SnapshotSpec<Row>>(spec: Spec): Snapshot<Row, SnapshotOf<Row, Spec>> => {
    const fields = Object.entries(spec).map(([key, value]) => {
      const [field, kind] = typeof value === "string" ? [value, "value" as const] : value;
      return { key, column: snakeCase(field), field: field as keyof Row, kind };
    });
    return {
      of(row) {
        const out: Record<string, unknown> = {};
        for (const f of fields) out[f.key] = jsValue(f.kind, row[f.field]);
        return out as SnapshotOf<Row, Spec>;
      },
      sql(alias) {
        return `jsonb_build_object(${fields.map((f) => `'${f.key}', ${sqlValue(f.kind, `${alias}.${f.column}`)}`).join(", ")})`;
      },
    };
  };
}

/** How every money object's snapshot ends: the provider's reference, the failure, the times. */
export const OUTCOME_AND_TIMES = {
  provider_reference: "providerReference",
  failure_code: "failureCode",
  failure_reason: "failureReason",
  created_at: ["createdAt", "time"],
  updated_at: ["updatedAt", "time"],
  completed_at: ["completedAt", "time"],
} as const;
