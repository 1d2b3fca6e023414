import type { ComponentChildren, HTMLAttributes } from "preact";
import { titleCase } from "./format.ts";
import { ErrorNote, Loading, TableWrap } from "./ui.tsx";

/** One column of a Table: its header, and what a row shows under it. */
export interface Column<T> {
  label: string;
  cell: (row: T) => ComponentChildren;
  /** A muted second line under the value (a description, a failure reason), where the row has one. */
  note?: (row: T) => ComponentChildren;
  /** Classes of the column's cells, e.g. "mono" or "break". */
  class?: string;
  /** Figures, aligned right: the header as well as the cells. */
  num?: boolean;
}

/** What a row element carries besides its cells: test hooks (data-*), a class, a click. */
export type RowProps = HTMLAttributes<HTMLTableRowElement> & { [hook: `data-${string}`]: string };

/**
 * A table of rows, one column spec each: the first column heads its row (th scope="row"), and every cell
 * carries its header as data-label (the stacked layout on phones). With `actions`, a last column of buttons
 * whose header is read out but not shown.
 */
export function Table<T>({
  label,
  columns,
  rows,
  rowKey,
  rowProps,
  bodyId,
  actions,
}: {
  label: string;
  columns: Column<T>[];
  rows: T[];
  /** The field that tells the rows apart. */
  rowKey: { [K in keyof T]: T[K] extends string | number ? K : never }[keyof T];
  rowProps?: (row: T) => RowProps;
  bodyId?: string;
  actions?: (row: T) => ComponentChildren;
}) {
  return (
    <TableWrap label={label}>
      <thead>
        <tr>
          {columns.map((column) => (
            <th scope="col" key={column.label} class={column.num ? "num" : undefined}>
              {column.label}
            </th>
          ))}
          {actions && (
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          )}
        </tr>
      </thead>
      <tbody id={bodyId}>
        {rows.map((row) => (
          <tr key={row[rowKey] as string | number} {...rowProps?.(row)}>
            {columns.map((column, index) => {
              const className = [column.num && "num", column.class].filter(Boolean).join(" ") || undefined;
              const note = column.note?.(row);
              const content = (
                <>
                  {column.cell(row)}
                  {note && <span class="muted block">{note}</span>}
                </>
              );
              return index === 0 ? (
                <th scope="row" key={column.label} data-label={column.label} class={className}>
                  {content}
                </th>
              ) : (
                <td key={column.label} data-label={column.label} class={className}>
                  {content}
                </td>
              );
            })}
            {actions && <td class="actions">{actions(row)}</td>}
          </tr>
        ))}
      </tbody>
    </TableWrap>
  );
}

/**
 * A list as it loads: its error, "Loading…" until the first answer, `empty` (an EmptyState) when there are
 * no items, else what `children` makes of the items.
 */
export function Listing<T>({
  items,
  loading,
  error,
  empty,
  children,
}: {
  items: T[] | null | undefined;
  loading: boolean;
  error: string | null;
  empty: ComponentChildren;
  children: (items: T[]) => ComponentChildren;
}) {
  return (
    <>
      <ErrorNote message={error} />
      {!items && loading && <Loading />}
      {items && items.length === 0 && empty}
      {items && items.length > 0 && children(items)}
    </>
  );
}

/** A list's Status filter: All, or one of `statuses` (named as their badges say them). */
export function StatusFilter<S extends string>({ id, label, statuses, value, onChange }: { id: string; label: string; statuses: readonly S[]; value: S | ""; onChange: (status: S | "") => void }) {
  return (
    <form class="filters" onSubmit={(event) => event.preventDefault()} aria-label={label}>
      <div class="field status-field">
        <label for={id}>Status</label>
        <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value as S | "")}>
          <option value="">All</option>
          {statuses.map((status) => (
            <option value={status} key={status}>
              {titleCase(status)}
            </option>
          ))}
        </select>
      </div>
    </form>
  );
}

/**
 * A list's From and To filters (the merchant's days, as the server counts them) and, once anything is filtered, the
 * button that clears every filter. `ids` prefixes the inputs' ids (`<ids>-from`, `<ids>-to`).
 */
export function DateRangeFields({
  ids,
  from,
  to,
  onChange,
  filtered,
  onClear,
}: {
  ids: string;
  from: string;
  to: string;
  onChange: (field: "dateFrom" | "dateTo", value: string) => void;
  filtered: boolean;
  onClear: () => void;
}) {
  return (
    <>
      <div class="field">
        <label for={`${ids}-from`}>From</label>
        <input id={`${ids}-from`} type="date" value={from} onChange={(e) => onChange("dateFrom", e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for={`${ids}-to`}>To</label>
        <input id={`${ids}-to`} type="date" value={to} onChange={(e) => onChange("dateTo", e.currentTarget.value)} />
      </div>
      {filtered && (
        <button type="button" class="secondary" onClick={onClear}>
          Clear filters
        </button>
      )}
    </>
  );
}
